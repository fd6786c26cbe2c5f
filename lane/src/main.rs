//! vipune-lane: vipune's own search code (`vipune::Database`) fed cached query vectors, many
//! personas per process: the model-free lane of vipune-eval (docs/vipune-contract.md).
//!
//! `vipune-lane version` prints, as JSON, what it was built from (set by .ci/vipune/build.sh).
//!
//! `vipune-lane search [--tmp DIR | --in-memory] [--breakdown]` reads personas from stdin and
//! answers each with one JSON line on stdout, in order. A persona is one JSON line
//!
//!   {"question_id": str, "question": str, "limit": int, "dims": int,
//!    "ids": [str], "contents": [str], "created_at": [str]}
//!
//! followed by (rows + 1) × dims little-endian float32: each row's vector, then the question's.
//! Per persona: a fresh database (`Database::open` on a temporary file, or ":memory:"), the rows
//! inserted with `Database::insert_with_id` in one transaction, as `vipune import` writes them
//! (its FTS5 triggers index each row), then
//!   semantic: `Database::search(question_id, query_vector, limit)`   (`search --no-hybrid`)
//!   hybrid:   `Database::search` and `Database::search_bm25` over clamp(10 × limit, 50, 10000)
//!             candidates each, fused by RRF k = 25 (a copy of vipune's private src/rrf.rs, the
//!             only part that is not vipune's own code), cut to limit    (`search --hybrid`)
//! with `--recency 0` (no recency blending) and the binary's trimmed query. Answer:
//!   {"question_id", "semantic": [[id, score], ...], "hybrid": [[id, score], ...],
//!    "seconds": {"open", "insert", "semantic", "dense_pool", "bm25", "fuse"[, "insert_without_fts"]}}
//! or {"question_id", "error": "..."} when vipune refuses the persona. A malformed stream stops
//! the process with exit 2 and a message naming the persona.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use serde_json::{json, Value};
use vipune::Database;

/// vipune's `RrfConfig::default().k` (src/rrf.rs).
const RRF_K: f64 = 25.0;
/// vipune's `MAX_CANDIDATE_POOL` (src/memory/search.rs).
const MAX_CANDIDATE_POOL: usize = 10_000;

/// The candidate pool of `MemoryStore::search_hybrid`: limit × 10, at least 50, at most 10,000.
fn candidate_pool(limit: usize) -> usize {
    limit.saturating_mul(10).clamp(50, MAX_CANDIDATE_POOL)
}

/// A copy of vipune's `rrf::rrf_fusion` (private): score = Σ 1 / (k + rank), ranks from 1, in
/// the order the lists are given; sorted by score, ties to the smaller id.
fn rrf_fusion(lists: &[Vec<(String, f64)>]) -> Vec<(String, f64)> {
    let mut fused: HashMap<String, f64> = HashMap::new();
    for list in lists {
        for (rank, (id, _)) in list.iter().enumerate() {
            let score = 1.0f64 / (RRF_K + (rank + 1) as f64);
            *fused.entry(id.clone()).or_insert(0.0) += score;
        }
    }
    let mut out: Vec<(String, f64)> = fused.into_iter().collect();
    out.sort_by(|a, b| {
        b.1.partial_cmp(&a.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
    out
}

/// What a persona's header line says.
struct Persona {
    question_id: String,
    question: String,
    limit: usize,
    dims: usize,
    ids: Vec<String>,
    contents: Vec<String>,
    created_at: Vec<String>,
}

fn strings(header: &Value, key: &str, qid: &str) -> Result<Vec<String>, String> {
    header
        .get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("persona {qid}: '{key}' is not a list"))?
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("persona {qid}: '{key}' holds a non-string"))
        })
        .collect()
}

fn parse_header(line: &str, number: usize) -> Result<Persona, String> {
    let header: Value = serde_json::from_str(line)
        .map_err(|e| format!("persona {number} (its header line): not JSON: {e}"))?;
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
        limit: count("limit")?,
        dims: count("dims")?,
        ids: strings(&header, "ids", &question_id)?,
        contents: strings(&header, "contents", &question_id)?,
        created_at: strings(&header, "created_at", &question_id)?,
        question_id,
    };
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

/// Where each persona's database lives.
enum Store {
    Folder(PathBuf),
    Memory,
}

impl Store {
    fn path(&self, number: usize) -> PathBuf {
        match self {
            Store::Folder(dir) => dir.join(format!("persona-{number}.db")),
            Store::Memory => PathBuf::from(":memory:"),
        }
    }

    fn remove(&self, path: &Path) {
        if let Store::Folder(_) = self {
            for suffix in ["", "-journal", "-wal", "-shm"] {
                let mut name = path.as_os_str().to_owned();
                name.push(suffix);
                let _ = std::fs::remove_file(PathBuf::from(name));
            }
        }
    }
}

fn err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |e| format!("{what}: {e}")
}

/// The persona's rows in one transaction, as `vipune import` writes them.
fn insert_rows(db: &Database, p: &Persona, blobs: &[u8]) -> Result<(), String> {
    let width = p.dims * 4;
    db.conn().execute_batch("BEGIN").map_err(err("BEGIN"))?;
    for (i, id) in p.ids.iter().enumerate() {
        let created = &p.created_at[i];
        db.insert_with_id(
            id,
            &p.question_id,
            &p.contents[i],
            &blobs[i * width..(i + 1) * width],
            None,
            created,
            created,
            "fact",
            "active",
            None,
            0,
            None,
        )
        .map_err(|e| format!("insert of row {id}: {e}"))?;
    }
    db.conn().execute_batch("COMMIT").map_err(err("COMMIT"))?;
    Ok(())
}

fn ranking(memories: Vec<vipune::Memory>) -> Vec<(String, f64)> {
    memories
        .into_iter()
        .map(|m| (m.id, m.similarity.unwrap_or(0.0)))
        .collect()
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

fn search(p: &Persona, vectors: &[u8], store: &Store, number: usize, breakdown: bool) -> Result<Value, String> {
    let query: Vec<f32> = vectors[p.ids.len() * p.dims * 4..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let text = p.question.trim(); // as MemoryStore::search and search_hybrid do
    let path = store.path(number);
    let mut laps = Laps::start();
    let result = (|| {
        if breakdown {
            // The same inserts into a database without the FTS5 insert trigger: the difference
            // to "insert" is what indexing the rows costs.
            let bare = Database::open(&path).map_err(err("Database::open"))?;
            bare.conn()
                .execute_batch("DROP TRIGGER memories_fts_insert")
                .map_err(err("DROP TRIGGER"))?;
            laps = Laps::start();
            insert_rows(&bare, p, vectors)?;
            laps.lap("insert_without_fts");
            drop(bare);
            store.remove(&path);
            laps.clock = Instant::now();
        }
        let db = Database::open(&path).map_err(err("Database::open"))?;
        laps.lap("open");
        insert_rows(&db, p, vectors)?;
        laps.lap("insert");
        let semantic = db
            .search(&p.question_id, &query, p.limit, None, None)
            .map_err(err("Database::search"))?;
        laps.lap("semantic");
        let pool = candidate_pool(p.limit);
        let dense = db
            .search(&p.question_id, &query, pool, None, None)
            .map_err(err("Database::search"))?;
        laps.lap("dense_pool");
        let bm25 = db
            .search_bm25(text, &p.question_id, pool, None, None)
            .map_err(err("Database::search_bm25"))?;
        laps.lap("bm25");
        let mut hybrid = rrf_fusion(&[ranking(dense), ranking(bm25)]);
        hybrid.truncate(p.limit);
        laps.lap("fuse");
        Ok(json!({"question_id": p.question_id, "semantic": ranking(semantic), "hybrid": hybrid,
                  "seconds": std::mem::take(&mut laps.seconds)}))
    })();
    store.remove(&path);
    result
}

fn run_search(store: Store, breakdown: bool) -> Result<(), String> {
    let mut input = BufReader::with_capacity(1 << 20, io::stdin().lock());
    let mut output = BufWriter::new(io::stdout().lock());
    let mut line = String::new();
    let mut vectors = Vec::new();
    for number in 1.. {
        line.clear();
        if input.read_line(&mut line).map_err(err("reading stdin"))? == 0 {
            return Ok(());
        }
        let persona = parse_header(line.trim_end(), number)?;
        vectors.resize((persona.ids.len() + 1) * persona.dims * 4, 0);
        input.read_exact(&mut vectors).map_err(|e| {
            format!("persona {}: its {} vectors of {} floats: {e}", persona.question_id,
                    persona.ids.len() + 1, persona.dims)
        })?;
        let answer = search(&persona, &vectors, &store, number, breakdown)
            .unwrap_or_else(|e| json!({"question_id": persona.question_id, "error": e}));
        serde_json::to_writer(&mut output, &answer).map_err(err("writing stdout"))?;
        output.write_all(b"\n").map_err(err("writing stdout"))?;
        output.flush().map_err(err("writing stdout"))?;
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
        "binary_sha256": option_env!("VIPUNE_LANE_BINARY_SHA256"),
        "calls": ["Database::open", "Database::insert_with_id", "Database::search",
                  "Database::search_bm25"],
        "fusion": format!("RRF k = {RRF_K} over clamp(10 x limit, 50, {MAX_CANDIDATE_POOL}) \
                           candidates (a copy of vipune's src/rrf.rs)"),
    })
}

const USAGE: &str = "usage: vipune-lane version | vipune-lane search [--tmp DIR | --in-memory] [--breakdown]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.first().map(String::as_str) {
        Some("version") => {
            println!("{}", version());
            Ok(())
        }
        Some("search") => {
            let mut store = None;
            let mut breakdown = false;
            let mut rest = args[1..].iter();
            let mut bad = None;
            while let Some(arg) = rest.next() {
                match arg.as_str() {
                    "--tmp" => store = rest.next().map(|d| Store::Folder(PathBuf::from(d))),
                    "--in-memory" => store = Some(Store::Memory),
                    "--breakdown" => breakdown = true,
                    other => bad = Some(other.to_string()),
                }
            }
            match (bad, store) {
                (Some(arg), _) => Err(format!("unknown argument {arg:?}\n{USAGE}")),
                (None, None) => Err(format!("search needs --tmp DIR or --in-memory\n{USAGE}")),
                (None, Some(store)) => run_search(store, breakdown),
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
