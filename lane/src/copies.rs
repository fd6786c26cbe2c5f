//! The lines of the lane that stay copies of vipune's code: everything else it runs is vipune's
//! own, from the source it was built against (the library, and the private files
//! lane/vipune_sources.json lists under "compiled"). Each copy below names the vipune item it
//! copies; that list pins each such item's sha256, and those of every other item on the path
//! from the search command's arguments to search_hybrid and from import to the insert that the
//! lane stands in for (the command's set-up and dispatch, its output, the query's model), and
//! .ci/vipune/build.sh records whether the source still has those exact bytes (`vipune-lane
//! version`, "copies"), so a report names a copy whose original this source changes instead of
//! silently measuring the old code.

use std::cell::RefCell;

use vipune::embedding::{EMBEDDING_DIMS, MAX_EMBEDDING_TOKENS};

use crate::embedding_profiles::EmbeddingRole;
use crate::errors::Error;
use crate::memory::search::SearchOptions;
use crate::memory::store::MemoryStore;
use crate::sqlite::{Database, Memory};

/// The question's cached vector and its token count (counted as vipune counts, by the harness).
pub(crate) struct CachedQuery {
    pub vector: Vec<f32>,
    pub tokens: usize,
}

thread_local! {
    /// What `get_embedding` answers for the persona being searched (set before each search).
    pub(crate) static QUERY: RefCell<Option<CachedQuery>> = const { RefCell::new(None) };
}

impl MemoryStore {
    /// Copies `MemoryStore::get_embedding` (src/memory/crud.rs) and the query path of
    /// `EmbeddingEngine::embed_role` (src/embedding/engine.rs) it calls, with the cached vector
    /// in place of the model's: vipune's compiled `search` and `search_hybrid` call this.
    pub(crate) fn get_embedding(&mut self, content: &str, role: EmbeddingRole) -> Result<Vec<f32>, Error> {
        self.assert_embedding_allowed()?;
        let profile = vipune::profile_for(&self.model_id)?;
        if !role.prefix(profile).is_empty() {
            return Err(Error::Config(format!(
                "vipune-lane: {}'s {role:?} prefix is not empty, and the cached vectors were embedded without it",
                self.model_id
            )));
        }
        if content.is_empty() {
            return Ok(vec![0.0f32; EMBEDDING_DIMS]);
        }
        QUERY.with(|query| {
            let query = query.borrow();
            let query = query.as_ref().expect("the persona's query is set before its search");
            if query.tokens > MAX_EMBEDDING_TOKENS {
                return Err(Error::ContentTooLong { token_count: query.tokens, max_tokens: MAX_EMBEDDING_TOKENS });
            }
            Ok(query.vector.clone())
        })
    }
}

/// The options of `vipune search` the harness passes (its `search_flags` but `--hybrid` /
/// `--no-hybrid`: the lane runs both), parsed as the command's clap definition reads them.
pub(crate) struct SearchFlags {
    pub limit: usize,
    pub recency: Option<f64>,
    pub no_touch: bool,
}

impl SearchFlags {
    pub(crate) fn parse(flags: &[String]) -> Result<SearchFlags, String> {
        let mut parsed = SearchFlags { limit: 10, recency: None, no_touch: false };
        let mut rest = flags.iter();
        while let Some(flag) = rest.next() {
            let mut value = |name: &str| rest.next().ok_or_else(|| format!("search flag {name} without its value"));
            match flag.as_str() {
                "--limit" => {
                    let v = value("--limit")?;
                    parsed.limit = v.parse().map_err(|_| format!("--limit {v:?} is not a count"))?;
                }
                "--recency" => {
                    let v = value("--recency")?;
                    parsed.recency = Some(v.parse().map_err(|_| format!("--recency {v:?} is not a number"))?);
                }
                "--no-touch" => parsed.no_touch = true,
                other => {
                    return Err(format!(
                        "vipune-lane does not know the search flag {other:?}: lane/src/copies.rs follows \
                         vipune's handle_search for each flag the harness passes (add it there)"
                    ));
                }
            }
        }
        Ok(parsed)
    }
}

/// Copies the call of `handle_search` (src/commands/handlers.rs) with the harness's flags: the
/// recency weight (vipune's default 0.3 where none is given) checked, no type or status filter,
/// `--hybrid` or `--no-hybrid`, and the hits touched unless `--no-touch`.
pub(crate) fn search_as_the_command(
    store: &mut MemoryStore,
    project_id: &str,
    query: &str,
    flags: &SearchFlags,
    hybrid: bool,
) -> Result<Vec<Memory>, Error> {
    let recency_weight = flags.recency.unwrap_or(store.config.recency_weight);
    crate::temporal::validate_recency_weight(recency_weight)?;
    let options = SearchOptions { memory_types: None, statuses: None };
    let memories = if hybrid {
        store.search_hybrid(project_id, query, flags.limit, recency_weight, options)?
    } else {
        store.search(project_id, query, flags.limit, recency_weight, options)?
    };
    if !flags.no_touch {
        let ids: Vec<&str> = memories.iter().map(|m| m.id.as_str()).collect();
        if !ids.is_empty() {
            let _ = store.db.touch_memories(&ids);
        }
    }
    Ok(memories)
}

/// A row as the import file gives it.
pub(crate) struct Row<'a> {
    pub id: &'a str,
    pub content: &'a str,
    pub embedding: &'a [u8],
    pub created_at: &'a str,
}

/// Copies what `run_import` (src/commands/import.rs) writes for the harness's import file: every
/// row in file order, in one transaction, with the columns the file gives.
pub(crate) fn insert_rows<'a>(
    db: &Database,
    project_id: &str,
    rows: impl Iterator<Item = Row<'a>>,
) -> Result<(), Error> {
    db.conn().execute_batch("BEGIN").map_err(|e| Error::Config(format!("BEGIN: {e}")))?;
    for row in rows {
        db.insert_with_id(
            row.id,
            project_id,
            row.content,
            row.embedding,
            None,
            row.created_at,
            row.created_at,
            "fact",
            "active",
            None,
            0,
            None,
        )
        .map_err(|e| Error::Config(format!("insert of row {}: {e}", row.id)))?;
    }
    db.conn().execute_batch("COMMIT").map_err(|e| Error::Config(format!("COMMIT: {e}")))
}

/// Copies `main`'s exit code for an error (src/main.rs): 3 for ContentTooLong, else 1.
pub(crate) fn exit_code(error: &Error) -> u8 {
    if matches!(error, Error::ContentTooLong { .. }) { 3 } else { 1 }
}
