//! vipune-lane: vipune's own search code fed cached query vectors, many personas per process:
//! the lib lane of vipune-eval (docs/vipune-contract.md, "The lib lane").
//!
//! What runs is vipune's: the library (`Database::open`, `insert_with_id`, `search`,
//! `search_bm25`) and, compiled into this crate from the very source the lane is built against,
//! the private files lane/vipune_sources.json lists (`MemoryStore::search` and `search_hybrid`
//! with their trim, checks, candidate pool and call order; `rrf_fusion`; the recency checks).
//! What stays a copy (the query's embedding answered from the cache, the command's call, the
//! import's transaction, the exit code) is in src/copies.rs, each item pinned by the sha256 of
//! the vipune item it copies.
//!
//! `vipune-lane version` prints, as JSON, what it was built from (set by .ci/vipune/build.sh):
//! vipune's version and source, the binary built beside it; and, recorded by build.rs as cargo
//! compiled them, the compiled files' sha256, each copy with whether the source still has the
//! pinned bytes, and the sha256 of the whole vipune source (`vipune_source_sha256`, which the
//! binary's build.json beside bin/ must name too).
//!
//! `vipune-lane search --tmp DIR [--breakdown] [--arms]` reads personas from stdin and answers each with
//! one JSON line on stdout, in order. A persona is one JSON line
//!
//!   {"question_id": str, "question": str, "question_tokens": int, "flags": [str], "dims": int,
//!    "ids": [str], "contents": [str], "created_at": [str]}
//!
//! followed by (rows + 1) × dims little-endian float32: each row's vector, then the question's
//! (`question_tokens`: the question's tokens as vipune counts them; `flags`: the options of the
//! binary's `vipune search` but `--hybrid` / `--no-hybrid`, e.g. `--recency 0 --limit 10
//! --no-touch`). Per persona: a fresh database file in DIR seeded as `vipune import` seeds it,
//! then the two searches as `vipune search --no-hybrid FLAGS` and `--hybrid FLAGS` run them, each
//! through vipune's `MemoryStore`. Kept stores (vipune_eval/stages/search/kept_stores.py), two
//! optional keys of the header: `"keep": PATH`, a copy of the database as seeded (closed, before
//! any search opens it) is written to PATH; `"seeded": PATH`, a database seeded before (a kept
//! store) is copied into DIR instead of seeding one (the persona then has no rows in its header
//! and only the question's vector follows it). A search never opens PATH itself. Answer:
//!   {"question_id", "semantic": [[id, score], ...], "hybrid": [[id, score], ...],
//!    "seconds": {"open", "insert"[, "keep"] | "copy", "semantic", "hybrid"[, "insert_without_fts"]}}
//! and, where the copy to "keep" failed (the persona is searched all the same), "keep_error".
//! and with `--arms` the arms the hybrid search fused (src/arms.rs): "fusions": [{"k": <RRF k>,
//! "lists": [[[id, score], ...], ...]}, ...], one entry per `rrf_fusion` call, each list as
//! vipune passed it (rank = position + 1); or, where this source's `rrf_fusion` cannot be wrapped,
//! "unrecorded_arms": "<why>".
//! or, where vipune refuses the persona, {"question_id", "error": "<vipune's message>",
//! "exit_code": <the binary's exit code for it>}. A malformed stream stops the process with
//! exit 2 and a message naming the persona.

use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use serde_json::{Value, json};

// vipune's crate paths, so that its private files compile here unchanged (`crate::errors::Error`…)
use vipune::{config, embedding, embedding_profiles, errors};
mod sqlite {
    pub use vipune::{Database, Memory};
    pub mod identity {
        pub use vipune::assert_identity_ok;
    }
}
include!(concat!(env!("OUT_DIR"), "/vipune_source.rs"));

mod arms;
mod copies;

use copies::{CachedQuery, QUERY, Row, SearchFlags, exit_code, insert_rows, search_as_the_command};
use errors::Error;
use memory::store::MemoryStore;
use sqlite::Database;

/// What a persona's header line says.
struct Persona {
    question_id: String,
    question: String,
    question_tokens: usize,
    flags: SearchFlags,
    dims: usize,
    ids: Vec<String>,
    contents: Vec<String>,
    created_at: Vec<String>,
    seeded: Option<PathBuf>, // a kept store to copy instead of seeding
    keep: Option<PathBuf>,   // where to copy the database once seeded
}

fn strings(header: &Value, key: &str, qid: &str) -> Result<Vec<String>, String> {
    header
        .get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("persona {qid}: '{key}' is not a list"))?
        .iter()
        .map(|v| v.as_str().map(str::to_string).ok_or_else(|| format!("persona {qid}: '{key}' holds a non-string")))
        .collect()
}

fn path(header: &Value, key: &str, qid: &str) -> Result<Option<PathBuf>, String> {
    match header.get(key) {
        None => Ok(None),
        Some(v) => {
            v.as_str().map(|p| Some(PathBuf::from(p))).ok_or_else(|| format!("persona {qid}: '{key}' is not a path"))
        }
    }
}

fn parse_header(line: &str, number: usize) -> Result<Persona, String> {
    let header: Value =
        serde_json::from_str(line).map_err(|e| format!("persona {number} (its header line): not JSON: {e}"))?;
    let text = |key: &str| -> Result<String, String> {
        header
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("persona {number}: '{key}' is not a string"))
    };
    let question_id = text("question_id")?;
    let count = |key: &str| -> Result<usize, String> {
        header
            .get(key)
            .and_then(Value::as_u64)
            .map(|n| n as usize)
            .ok_or_else(|| format!("persona {question_id}: '{key}' is not a count"))
    };
    let persona = Persona {
        question: text("question")?,
        question_tokens: count("question_tokens")?,
        flags: SearchFlags::parse(&strings(&header, "flags", &question_id)?)
            .map_err(|e| format!("persona {question_id}: {e}"))?,
        dims: count("dims")?,
        ids: strings(&header, "ids", &question_id)?,
        contents: strings(&header, "contents", &question_id)?,
        created_at: strings(&header, "created_at", &question_id)?,
        seeded: path(&header, "seeded", &question_id)?,
        keep: path(&header, "keep", &question_id)?,
        question_id,
    };
    if persona.seeded.is_some() && (persona.keep.is_some() || !persona.ids.is_empty()) {
        return Err(format!(
            "persona {}: a kept store (\"seeded\") comes without rows and without \"keep\"",
            persona.question_id
        ));
    }
    let n = persona.ids.len();
    if persona.contents.len() != n || persona.created_at.len() != n {
        return Err(format!(
            "persona {}: {} ids, {} contents, {} created_at",
            persona.question_id,
            n,
            persona.contents.len(),
            persona.created_at.len()
        ));
    }
    Ok(persona)
}

/// A persona's database file in the lane's folder, and its removal with SQLite's side files.
fn database_path(dir: &Path, number: usize) -> PathBuf {
    dir.join(format!("persona-{number}.db"))
}

fn remove_database(path: &Path) {
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(name));
    }
}

fn rows<'a>(p: &'a Persona, blobs: &'a [u8]) -> impl Iterator<Item = Row<'a>> {
    let width = p.dims * 4;
    p.ids.iter().enumerate().map(move |(i, id)| Row {
        id,
        content: &p.contents[i],
        embedding: &blobs[i * width..(i + 1) * width],
        created_at: &p.created_at[i],
    })
}

fn ranking(memories: Vec<vipune::Memory>) -> Vec<(String, f64)> {
    memories.into_iter().map(|m| (m.id, m.similarity.unwrap_or(0.0))).collect()
}

/// Wall time of each step of a persona, in seconds.
struct Laps {
    clock: Instant,
    seconds: serde_json::Map<String, Value>,
}

impl Laps {
    fn start() -> Self {
        Laps { clock: Instant::now(), seconds: serde_json::Map::new() }
    }

    fn lap(&mut self, name: &str) {
        self.seconds.insert(name.to_string(), json!(self.clock.elapsed().as_secs_f64()));
        self.clock = Instant::now();
    }
}

/// What a search answers besides its rankings: `--breakdown` (the inserts timed without FTS5),
/// `--arms` (the lists the hybrid search fused).
#[derive(Clone, Copy)]
struct Extras {
    breakdown: bool,
    arms: bool,
}

fn search(p: &Persona, vectors: &[u8], dir: &Path, number: usize, extras: Extras) -> Result<Value, Error> {
    let query: Vec<f32> = vectors[p.ids.len() * p.dims * 4..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    QUERY.with(|q| *q.borrow_mut() = Some(CachedQuery { vector: query, tokens: p.question_tokens }));
    let path = database_path(dir, number);
    let mut laps = Laps::start();
    let result = (|| {
        let mut keep_error = None;
        if extras.breakdown && p.seeded.is_none() {
            // The same inserts into a database without the FTS5 insert trigger: the difference
            // to "insert" is what indexing the rows costs.
            let bare = Database::open(&path)?;
            bare.conn()
                .execute_batch("DROP TRIGGER memories_fts_insert")
                .map_err(|e| Error::Config(format!("DROP TRIGGER: {e}")))?;
            laps = Laps::start();
            insert_rows(&bare, &p.question_id, rows(p, vectors))?;
            laps.lap("insert_without_fts");
            drop(bare);
            remove_database(&path);
            laps.clock = Instant::now();
        }
        if let Some(kept) = &p.seeded {
            std::fs::copy(kept, &path)
                .map_err(|e| Error::Config(format!("copying the kept store {}: {e}", kept.display())))?;
            laps.lap("copy");
        } else {
            let db = Database::open(&path)?;
            laps.lap("open");
            insert_rows(&db, &p.question_id, rows(p, vectors))?;
            laps.lap("insert");
            drop(db); // closed: the file is the database as seeded
            if let Some(keep) = &p.keep {
                if let Err(e) = std::fs::copy(&path, keep) {
                    let _ = std::fs::remove_file(keep);
                    keep_error = Some(format!("copying the seeded database to {}: {e}", keep.display()));
                }
                laps.lap("keep");
            }
        }
        let mut store = MemoryStore::new(&path, vipune::EMBED_MODEL_ID, config::Config::default())?;
        let semantic = search_as_the_command(&mut store, &p.question_id, &p.question, &p.flags, false)?;
        laps.lap("semantic");
        arms::take(); // what an earlier persona's failed search may have left
        let hybrid = search_as_the_command(&mut store, &p.question_id, &p.question, &p.flags, true)?;
        laps.lap("hybrid");
        let fusions = arms::take();
        let mut answer = json!({"question_id": p.question_id, "semantic": ranking(semantic),
                                "hybrid": ranking(hybrid), "seconds": std::mem::take(&mut laps.seconds)});
        if let Some(why) = keep_error.take() {
            answer["keep_error"] = json!(why);
        }
        if extras.arms {
            answer["fusions"] = json!(fusions);
            if let Some(why) = UNRECORDED_ARMS {
                answer["unrecorded_arms"] = json!(why);
            }
        }
        Ok(answer)
    })();
    remove_database(&path);
    result
}

fn run_search(dir: &Path, extras: Extras) -> Result<(), String> {
    let mut input = BufReader::with_capacity(1 << 20, io::stdin().lock());
    let mut output = BufWriter::new(io::stdout().lock());
    let mut line = String::new();
    let mut vectors = Vec::new();
    for number in 1.. {
        line.clear();
        if input.read_line(&mut line).map_err(|e| format!("reading stdin: {e}"))? == 0 {
            return Ok(());
        }
        let persona = parse_header(line.trim_end(), number)?;
        vectors.resize((persona.ids.len() + 1) * persona.dims * 4, 0);
        input.read_exact(&mut vectors).map_err(|e| {
            format!(
                "persona {}: its {} vectors of {} floats: {e}",
                persona.question_id,
                persona.ids.len() + 1,
                persona.dims
            )
        })?;
        let answer = search(&persona, &vectors, dir, number, extras).unwrap_or_else(
            |e| json!({"question_id": persona.question_id, "error": e.to_string(), "exit_code": exit_code(&e)}),
        );
        let written = serde_json::to_writer(&mut output, &answer)
            .map_err(io::Error::from)
            .and_then(|()| output.write_all(b"\n"))
            .and_then(|()| output.flush());
        written.map_err(|e| format!("writing stdout: {e}"))?;
    }
    Ok(())
}

fn version() -> Value {
    json!({
        "name": "vipune-lane",
        "lane": env!("CARGO_PKG_VERSION"),
        "vipune": option_env!("VIPUNE_LANE_VIPUNE_VERSION"),
        "vipune_source": option_env!("VIPUNE_LANE_VIPUNE_SOURCE"),
        "lane_source": option_env!("VIPUNE_LANE_SOURCE_ID"),
        // none for a lane built alone (build.sh --lane-only)
        "binary_sha256": option_env!("VIPUNE_LANE_BINARY_SHA256").filter(|sha| !sha.is_empty()),
        "profile": option_env!("VIPUNE_LANE_PROFILE"),
        "calls": ["Database::open", "Database::insert_with_id", "MemoryStore::new",
                  "MemoryStore::search", "MemoryStore::search_hybrid"],
        // what build.rs recorded as cargo compiled the vipune source: each file and copy, and the whole source
        "sources": serde_json::from_str::<Value>(include_str!(concat!(env!("OUT_DIR"), "/vipune_sources.json")))
            .unwrap_or(Value::Null),
        "unrecorded_arms": UNRECORDED_ARMS,
    })
}

const USAGE: &str = "usage: vipune-lane version | vipune-lane search --tmp DIR [--breakdown] [--arms]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.first().map(String::as_str) {
        Some("version") => {
            println!("{}", version());
            Ok(())
        }
        Some("search") => {
            let mut dir = None;
            let mut extras = Extras { breakdown: false, arms: false };
            let mut rest = args[1..].iter();
            let mut bad = None;
            while let Some(arg) = rest.next() {
                match arg.as_str() {
                    "--tmp" => dir = rest.next().map(PathBuf::from),
                    "--breakdown" => extras.breakdown = true,
                    "--arms" => extras.arms = true,
                    other => bad = Some(other.to_string()),
                }
            }
            match (bad, dir) {
                (Some(arg), _) => Err(format!("unknown argument {arg:?}\n{USAGE}")),
                (None, None) => Err(format!("search needs --tmp DIR\n{USAGE}")),
                (None, Some(dir)) => run_search(&dir, extras),
            }
        }
        _ => Err(USAGE.to_string()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("vipune-lane: {message}");
            ExitCode::from(2)
        }
    }
}
