#!/usr/bin/env python3
"""A contract-faithful fake of the ``vipune`` binary, for the project's fast tests.

The real vipune (Rust, github.com/randomm/vipune) is built from crates.io by
.ci/vipune/build.sh; this script re-implements the part of its CLI the harness relies on, as the
real 0.20.2 does it, independently of the harness code (stdlib + numpy + onnxruntime + tokenizers
only, no fastembed), so that tests run the workflow end to end in seconds and use it as a
differential check. tests/project/test_fake_vipune.py runs every test of it on the real binary too.
See docs/vipune-contract.md for the contract it follows.

Implemented: global ``--json``, ``-p/--project``, ``--db-path`` (anywhere, as clap's
global args); ``version`` (there is no ``--version`` flag: a usage error, as in the real one);
``import FILE|-``; ``search``; ``add TEXT``; ``export OUT`` (``-`` is a file named ``-``, as in
the real one); ``doctor --fts [--repair]``.

Exit codes: 0 ok, 1 error (``{"error": ...}`` on stdout with --json), 2 add conflicts,
3 text over 512 tokens, 64 usage error.

Fault injection for tests, env ``FAKE_VIPUNE_FAULT``:
``crash`` (SIGKILL itself during search), ``garbage`` (non-JSON on search), ``empty``
(no output from search, exit 0), ``hang`` (search sleeps forever), ``short-import``
(import reports one row fewer than it inserted), ``error`` (search exits 1 with
``{"error": "injected"}``); with ``FAKE_VIPUNE_FAULT_MATCH`` set, the search faults fire only
for queries containing that text. Release-level faults: ``no-import`` (an old vipune
without ``import``/``export``), ``cls-pooling`` (embeds with the CLS vector instead of the mean),
``rrf-k60`` (RRF with k = 60), ``bm25-or`` (an OR of the query words instead of vipune's AND),
``pool-all`` (every row in both candidate pools), ``ties-by-id`` (semantic ties to the smaller
id), ``query-prefix`` (a search embeds its query with bge's retrieval instruction before it, as
an edit of vipune's ``prefix_input`` for the Query role would; passages are embedded as before), ``repeat-id`` (the second result repeats the first), ``over-limit`` (more results than
``--limit``), ``version-garbage`` / ``version-fail`` / ``version-hang`` (``version`` prints
non-JSON, exits 1, or never returns), ``hang-child`` (search starts a child that outlives a kill
of the parent and then hangs). ``FAKE_VIPUNE_DELAY`` (seconds) makes every search that slow.
``FAKE_VIPUNE_PLATFORM=macos`` reads the config where vipune does on macOS.

``FAKE_VIPUNE_QUERY_CACHE`` (a folder; the wrappers of tests/support/fakes.py set it) keeps each
query vector the fake has computed, under the sha256 of the model's and the tokenizer's bytes, the
pooling and the text: a search of a query embedded before reads its vector back instead of
loading onnxruntime and numpy (0.12 s of a search's 0.18 s), and gets the same bytes. The
cosine is plain Python in f64, summed in order as vipune's Rust iterator does.

Like the real binary, every command first creates ``~/.vipune`` and opens a database
(``--db-path``, else the config's ``database_path``, else ``~/.vipune/memories.db``), and reads
``config.toml`` from the platform config directory ($XDG_CONFIG_HOME or ~/.config on Linux,
~/Library/Application Support on macOS, which XDG_CONFIG_HOME does not move).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import math
import operator
import os
import signal
import sqlite3
import sys
import time
from array import array
from datetime import UTC, datetime
from functools import reduce
from pathlib import Path

EMBEDDING_DIMS = 384
BLOB_BYTES = EMBEDDING_DIMS * 4
MAX_EMBEDDING_TOKENS = 512
MAX_SEARCH_LIMIT = 10_000
MAX_INPUT_CHARS = 100_000
RRF_K = 25.0
DECAY_LAMBDA = 1e-6  # per second, exponential decay (src/temporal.rs default)
IMPORTANCE_SCALE = {"low": 1.0, "medium": 0.5, "high": 0.25, "critical": 0.0}
MODEL_ID = "BAAI/bge-small-en-v1.5"
MODEL_REVISION = "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"
DEFAULT_VERSION = "0.20.2"
DEFAULT_RECENCY_WEIGHT = 0.3
DEFAULT_SIMILARITY_THRESHOLD = 0.85
IMPORT_BUSY_TIMEOUT_S = 30.0

EXIT_OK, EXIT_ERROR, EXIT_CONFLICTS, EXIT_TOO_LONG, EXIT_USAGE = 0, 1, 2, 3, 64

SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    content TEXT NOT NULL,
    metadata TEXT,
    embedding BLOB NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    memory_type TEXT NOT NULL DEFAULT 'fact',
    status TEXT NOT NULL DEFAULT 'active',
    superseded_by TEXT,
    retrieval_count INTEGER NOT NULL DEFAULT 0,
    last_retrieved_at TEXT,
    importance TEXT NOT NULL DEFAULT 'medium'
);
CREATE INDEX IF NOT EXISTS idx_memories_project ON memories(project_id);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
    content,
    project_id UNINDEXED,
    tokenize='porter unicode61',
    content_rowid='rowid',
    content='memories'
);
CREATE TRIGGER IF NOT EXISTS memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, content, project_id)
    VALUES (new.rowid, new.content, new.project_id);
END;
CREATE TRIGGER IF NOT EXISTS memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, content, project_id)
    VALUES('delete', old.rowid, old.content, old.project_id);
END;
CREATE TRIGGER IF NOT EXISTS memories_fts_update AFTER UPDATE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, content, project_id)
    VALUES('delete', old.rowid, old.content, old.project_id);
    INSERT INTO memories_fts(rowid, content, project_id)
    VALUES (new.rowid, new.content, new.project_id);
END;
"""

# The harness-relevant row columns, in export order (import format).
ROW_FIELDS = (
    "id",
    "project_id",
    "content",
    "metadata",
    "embedding",
    "created_at",
    "updated_at",
    "memory_type",
    "status",
    "superseded_by",
    "retrieval_count",
    "last_retrieved_at",
    "importance",
)
REQUIRED_STR = ("id", "project_id", "content", "embedding", "created_at", "updated_at")
OPTIONAL_STR = ("metadata", "superseded_by", "last_retrieved_at")


class VipuneError(Exception):
    """An error reported to the user; ``code`` is the process exit code."""

    def __init__(self, message: str, code: int = EXIT_ERROR):
        super().__init__(message)
        self.code = code


class UsageError(Exception):
    pass


# --------------------------------------------------------------------------- helpers
def now_rfc3339() -> str:
    return datetime.now(UTC).isoformat()


def print_json(value) -> None:
    """serde_json::to_string_pretty equivalent (2-space indent)."""
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def parse_rfc3339(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise VipuneError(f"Invalid timestamp: {text} ({exc})") from exc
    if value.tzinfo is None:
        raise VipuneError(f"Invalid timestamp: {text} (no timezone)")
    return value


def config_path() -> Path:
    """dirs::config_dir(): $XDG_CONFIG_HOME or ~/.config on Linux; on macOS
    ~/Library/Application Support, whatever XDG_CONFIG_HOME says."""
    if os.environ.get("FAKE_VIPUNE_PLATFORM") == "macos" or sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "vipune" / "config.toml"
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(xdg) / "vipune" / "config.toml"


def load_config() -> dict:
    """Defaults < config.toml in the platform config directory < VIPUNE_* env vars.

    Read: the keys that change results (recency_weight, similarity_threshold, embedding_model)
    and database_path; hybrid only from VIPUNE_HYBRID (the file has no such key).
    """
    config = {
        "recency_weight": DEFAULT_RECENCY_WEIGHT,
        "hybrid": False,
        "similarity_threshold": DEFAULT_SIMILARITY_THRESHOLD,
        "embedding_model": MODEL_ID,
        "database_path": None,
    }
    path = config_path()
    if path.is_file():
        import tomllib

        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise VipuneError(f"Configuration error: cannot parse {path}: {exc}") from exc
        for key in ("recency_weight", "similarity_threshold"):
            if key in data:
                if isinstance(data[key], bool) or not isinstance(data[key], (int, float)):
                    raise VipuneError(f"Configuration error: {key} in {path} must be a number")
                config[key] = float(data[key])
        # `hybrid` is not a key of vipune's config file (src/config/loader.rs): only
        # VIPUNE_HYBRID and the flags choose hybrid search.
        for key in ("embedding_model", "database_path"):
            if key in data:
                if not isinstance(data[key], str):
                    raise VipuneError(f"Configuration error: {key} in {path} must be a string")
                config[key] = data[key]
    for env, key in (("VIPUNE_EMBEDDING_MODEL", "embedding_model"), ("VIPUNE_DATABASE_PATH", "database_path")):
        if os.environ.get(env):
            config[key] = os.environ[env]
    for env, key in (
        ("VIPUNE_RECENCY_WEIGHT", "recency_weight"),
        ("VIPUNE_SIMILARITY_THRESHOLD", "similarity_threshold"),
    ):
        if env in os.environ:
            raw = os.environ[env]
            try:
                config[key] = float(raw.strip())
            except ValueError as exc:
                raise VipuneError(f"Configuration error: Invalid {env} value: {raw!r}") from exc
    if "VIPUNE_HYBRID" in os.environ:
        raw = os.environ["VIPUNE_HYBRID"].lower()
        if raw in ("true", "1"):
            config["hybrid"] = True
        elif raw in ("false", "0", ""):
            config["hybrid"] = False
        else:
            print(
                f"warning: VIPUNE_HYBRID='{raw}' is not a valid boolean (expected true/false/1/0), keeping default",
                file=sys.stderr,
            )
    if not 0.0 <= config["recency_weight"] <= 1.0:
        raise VipuneError("Configuration error: recency_weight must be between 0.0 and 1.0")
    return config


def project_of(args) -> str:
    """src/project.rs: --project trimmed, else VIPUNE_PROJECT, else (the real one asks git for
    the origin remote and the repository root first; the fake skips git) the working folder's
    name."""
    for value in (args.project, os.environ.get("VIPUNE_PROJECT")):
        if value and value.strip():
            return value.strip()
    return Path.cwd().name or "unknown"


# --------------------------------------------------------------------------- database
def default_db_path() -> Path:
    return Path.home() / ".vipune" / "memories.db"


def prepare_home() -> None:
    """What the real binary does before any command: create ~/.vipune (exit 1 if it cannot)."""
    try:
        (Path.home() / ".vipune").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise VipuneError(
            f"Configuration error: Failed to create database directory {Path.home() / '.vipune'}: {exc}"
        ) from exc


def open_db(db_path: str | None, busy_timeout: float = 5.0) -> sqlite3.Connection:
    """--db-path, else the config's database_path, else ~/.vipune/memories.db (the user's own
    store, created or migrated: exactly what the harness must never let happen)."""
    if not db_path:
        db_path = load_config()["database_path"] or str(default_db_path())
    if ".." in Path(db_path).parts:
        raise VipuneError(f"Invalid input: database path must not contain '..': {db_path}")
    if not Path(db_path).parent.is_dir():
        raise VipuneError(f"Configuration error: the folder of {db_path} does not exist")
    try:
        conn = sqlite3.connect(db_path, timeout=busy_timeout, isolation_level=None)
        conn.executescript(SCHEMA)
    except sqlite3.Error as exc:
        raise VipuneError(f"Database error: cannot open {db_path}: {exc}") from exc
    return conn


def blob_to_vec(blob: bytes) -> array:
    """A stored little-endian f32 BLOB as an array of its 384 floats."""
    if len(blob) != BLOB_BYTES:
        raise VipuneError(f"Invalid BLOB size: expected {BLOB_BYTES} bytes, got {len(blob)} bytes")
    vec = array("f")
    vec.frombytes(blob)
    if sys.byteorder == "big":
        vec.byteswap()
    return vec


def vec_to_blob(vec) -> bytes:
    arr = array("f", vec)
    if len(arr) != EMBEDDING_DIMS:
        raise VipuneError(f"Mismatched dimensions: expected {EMBEDDING_DIMS}, got ({len(arr)},)")
    if sys.byteorder == "big":
        arr.byteswap()
    return arr.tobytes()


# --------------------------------------------------------------------------- embedding
class Embedder:
    """vipune's recipe: tokenizer.json + ONNX, mean pooling over the mask, then L2."""

    def __init__(self):
        configured = load_config()["embedding_model"]
        if configured != MODEL_ID:
            raise VipuneError(
                f"Configuration error: Failed to load embedding model '{configured}' "
                "(the fake knows only bge-small-en-v1.5)"
            )
        model_dir = self._snapshot_dir()
        onnx_path = next(
            (p for p in (model_dir / "onnx" / "model.onnx", model_dir / "model.onnx") if p.is_file()), None
        )
        tok_path = model_dir / "tokenizer.json"
        if onnx_path is None:
            raise VipuneError(
                f"Configuration error: Failed to load embedding model '{MODEL_ID}': no "
                f"onnx/model.onnx or model.onnx under {model_dir} (the fake never downloads)"
            )
        if not tok_path.is_file():
            raise VipuneError(
                f"Configuration error: Failed to load embedding model '{MODEL_ID}': "
                f"{tok_path} not found (the fake never downloads)"
            )
        self.onnx_path, self.tok_path = onnx_path, tok_path
        self.session = None  # loaded by the first text it must embed (not on a cached query)

    def _load(self) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(self.tok_path))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_EMBEDDING_TOKENS)
        self.count_tokenizer = Tokenizer.from_file(str(self.tok_path))
        self.count_tokenizer.no_padding()
        self.count_tokenizer.no_truncation()

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        self.session = ort.InferenceSession(str(self.onnx_path), options, providers=["CPUExecutionProvider"])
        self.input_names = {i.name for i in self.session.get_inputs()}
        outputs = [o.name for o in self.session.get_outputs()]
        name = next((n for n in ("last_hidden_state", "token_embeddings") if n in outputs), None)
        if name is None:
            raise VipuneError("Inference error: Output tensor 'last_hidden_state' or 'token_embeddings' not found")
        self.output_name = name

    def _cache_file(self, text: str) -> Path | None:
        """Where the vector of ``text`` is kept under FAKE_VIPUNE_QUERY_CACHE (None: no cache)."""
        folder = os.environ.get("FAKE_VIPUNE_QUERY_CACHE")
        if not folder:
            return None
        key = hashlib.sha256(b"fake-vipune query vector 1\0")
        for part in (self.onnx_path.read_bytes(), self.tok_path.read_bytes()):
            key.update(hashlib.sha256(part).digest())
        pooling = "cls" if os.environ.get("FAKE_VIPUNE_FAULT") == "cls-pooling" else "mean"
        key.update(f"{pooling}\0{text}".encode("utf-8", "surrogatepass"))
        return Path(folder) / f"{key.hexdigest()}.f32"

    def embed(self, text: str) -> array:
        if not text:
            return array("f", bytes(BLOB_BYTES))
        cached = self._cache_file(text)
        if cached is not None and cached.is_file():
            return blob_to_vec(cached.read_bytes())
        vec = self._embed(text)
        if cached is not None:
            self._keep(cached, vec)
        return vec

    @staticmethod
    def _keep(cached: Path, vec: array) -> None:
        """Written whole, then renamed: a search beside it reads all or none. A folder that cannot
        be written keeps nothing (the cache is the fake's, not part of vipune's contract)."""
        import tempfile

        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=cached.parent, delete=False) as part:
                part.write(vec_to_blob(vec))
            os.replace(part.name, cached)
        except OSError:
            pass

    @staticmethod
    def _snapshot_dir() -> Path:
        hf_home = os.environ.get("HF_HOME") or str(Path.home() / ".cache" / "huggingface")
        repo_dir = Path(hf_home) / "hub" / ("models--" + MODEL_ID.replace("/", "--"))
        ref = repo_dir / "refs" / MODEL_REVISION
        try:
            commit = ref.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise VipuneError(
                f"Configuration error: Failed to load embedding model '{MODEL_ID}': "
                f"cannot read {ref} ({exc.strerror}); the fake never downloads"
            ) from exc
        return repo_dir / "snapshots" / commit

    def token_count(self, text: str) -> int:
        if self.session is None:
            self._load()
        return len(self.count_tokenizer.encode(text, add_special_tokens=True).ids)

    def _embed(self, text: str) -> array:
        import numpy as np

        count = self.token_count(text)
        if count > MAX_EMBEDDING_TOKENS:
            raise VipuneError(
                f"content exceeds {MAX_EMBEDDING_TOKENS}-token embedding limit (measured: {count} tokens)",
                EXIT_TOO_LONG,
            )
        enc = self.tokenizer.encode(text, add_special_tokens=True)
        if not enc.ids:
            return array("f", bytes(BLOB_BYTES))
        ids = np.asarray([enc.ids], dtype=np.int64)
        mask = np.asarray([enc.attention_mask], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feed["token_type_ids"] = np.zeros_like(ids)
        (hidden,) = self.session.run([self.output_name], feed)
        if hidden.ndim != 3 or hidden.shape[0] != 1 or hidden.shape[2] != EMBEDDING_DIMS:
            raise VipuneError(
                f"Inference error: Unexpected output shape: {list(hidden.shape)}, "
                f"batch=1, hidden={EMBEDDING_DIMS} expected"
            )
        m = mask[0].astype(np.float32)
        pooled = (hidden[0].astype(np.float32) * m[:, None]).sum(axis=0) / max(m.sum(), 1e-9)
        if os.environ.get("FAKE_VIPUNE_FAULT") == "cls-pooling":
            pooled = hidden[0, 0].astype(np.float32)
        norm = max(float(np.sqrt((pooled * pooled).sum())), 1e-9)
        return blob_to_vec((pooled / norm).astype("<f4").tobytes())


# --------------------------------------------------------------------------- search
def validate_limit(limit: int) -> None:
    if limit == 0:
        raise VipuneError("Invalid input: Limit must be greater than 0")
    if limit > MAX_SEARCH_LIMIT:
        raise VipuneError(f"Invalid input: Limit {limit} exceeds maximum allowed ({MAX_SEARCH_LIMIT})")


def validate_query(query: str) -> None:
    if not query:
        raise VipuneError("Input cannot be empty")
    if len(query) > MAX_INPUT_CHARS:
        raise VipuneError(f"Input too long: {len(query)} characters (max: {MAX_INPUT_CHARS})")


SELECT_COLS = (
    "m.id, m.project_id, m.content, m.metadata, m.embedding, m.created_at, "
    "m.updated_at, m.importance, m.retrieval_count, m.last_retrieved_at, "
    "m.memory_type, m.status"
)


def _row_dict(row) -> dict:
    keys = (
        "id",
        "project_id",
        "content",
        "metadata",
        "embedding",
        "created_at",
        "updated_at",
        "importance",
        "retrieval_count",
        "last_retrieved_at",
        "memory_type",
        "status",
    )
    return dict(zip(keys, row))


def semantic_search(conn, project_id: str, query_vec, limit: int) -> list[dict]:
    """Brute-force cosine (f64) over the project's active rows, read newest first (then in
    import order), then a stable sort by score: exact ties keep the newer row first.
    src/sqlite/embedding.rs: each f32 widened to f64, products and squares summed in order."""
    validate_limit(limit)
    rows = [
        _row_dict(r)
        for r in conn.execute(
            f"SELECT {SELECT_COLS} FROM memories m WHERE m.project_id = ? "
            "AND m.status = 'active' ORDER BY m.created_at DESC, m.rowid ASC",
            (project_id,),
        )
    ]
    q = list(map(float, query_vec))
    q_norm, q_finite = math.sqrt(_dot(q, q)), all(map(math.isfinite, q))
    for row in rows:
        v = blob_to_vec(row["embedding"]).tolist()
        if not (q_finite and all(map(math.isfinite, v))):
            raise VipuneError("Invalid embedding: Vector contains NaN or infinite values")
        v_norm = math.sqrt(_dot(v, v))
        row["similarity"] = 0.0 if q_norm == 0 or v_norm == 0 else _dot(q, v) / (q_norm * v_norm)
    if os.environ.get("FAKE_VIPUNE_FAULT") == "ties-by-id":  # the older contract's rule
        rows.sort(key=lambda r: r["id"])
        rows.sort(key=lambda r: r["created_at"], reverse=True)
    rows.sort(key=lambda r: r["similarity"], reverse=True)  # stable
    return rows[:limit]


def _dot(a: list[float], b: list[float]) -> float:
    """Sum of the products in order, as a Rust f64 Iterator::sum (sum() compensates from Python 3.12)."""
    return reduce(operator.add, map(operator.mul, a, b), 0.0)


def escape_fts_query(query: str) -> str:
    """src/sqlite/fts.rs escape_fts_query: every whitespace token quoted, implicit AND."""
    joiner = " OR " if os.environ.get("FAKE_VIPUNE_FAULT") == "bm25-or" else " "
    return joiner.join('"' + w.replace("\\", "\\\\").replace('"', '""') + '"' for w in query.split())


def bm25_search(conn, query: str, project_id: str, limit: int) -> list[dict]:
    validate_limit(limit)
    escaped = escape_fts_query(query)
    if not escaped:
        return []
    sql = (
        f"SELECT {SELECT_COLS}, bm25(memories_fts) AS bm25_score "
        "FROM memories_fts JOIN memories m ON m.rowid = memories_fts.rowid "
        "WHERE memories_fts MATCH ? AND m.project_id = ? AND m.status = 'active' "
        "ORDER BY bm25(memories_fts) LIMIT ?"
    )
    out = []
    for r in conn.execute(sql, (escaped, project_id, limit)):
        row = _row_dict(r[:-1])
        row["similarity"] = float(r[-1])
        out.append(row)
    return out


def rrf_k() -> float:
    """The k the fusion uses: vipune's 25, or 60 under the fault ``rrf-k60``."""
    return 60.0 if os.environ.get("FAKE_VIPUNE_FAULT") == "rrf-k60" else RRF_K


def rrf_fusion(result_lists: list[list[dict]]) -> list[dict]:
    k = rrf_k()
    fused: dict[str, tuple[dict, float]] = {}
    for results in result_lists:
        for rank, row in enumerate(results, start=1):
            score = 1.0 / (k + rank)
            if row["id"] in fused:
                kept, acc = fused[row["id"]]
                fused[row["id"]] = (kept, acc + score)
            else:
                fused[row["id"]] = (dict(row), score)
    ordered = sorted(fused.values(), key=lambda pair: (-pair[1], pair[0]["id"]))
    out = []
    for row, score in ordered:
        row["similarity"] = score
        out.append(row)
    return out


def apply_recency(rows: list[dict], weight: float) -> list[dict]:
    """(1 - w) * score + w * exp(-lambda * importance_scale * age_seconds)."""
    now = datetime.now(UTC)
    for row in rows:
        age = max((now - parse_rfc3339(row["created_at"])).total_seconds(), 0.0)
        scale = IMPORTANCE_SCALE.get((row.get("importance") or "medium").lower(), 0.5)
        decay = math.exp(max(-DECAY_LAMBDA * scale * age, -700.0))
        row["similarity"] = (1.0 - weight) * row["similarity"] + weight * decay
    rows.sort(key=lambda r: r["similarity"], reverse=True)
    return rows


# --------------------------------------------------------------------------- commands
def cmd_version(args) -> int:
    fault = os.environ.get("FAKE_VIPUNE_FAULT", "")
    if fault == "version-garbage":
        print("vipune: something went wrong {")
        return EXIT_OK
    if fault == "version-fail":
        print("error: cannot initialise", file=sys.stderr)
        return EXIT_ERROR
    if fault == "version-hang":
        while True:
            time.sleep(3600)
    version = os.environ.get("FAKE_VIPUNE_VERSION", DEFAULT_VERSION)
    if args.json:
        print_json({"name": "vipune", "version": version})
    else:
        print(f"vipune {version}")
    return EXIT_OK


def inject_search_fault(query: str) -> int | None:
    fault = os.environ.get("FAKE_VIPUNE_FAULT", "")
    time.sleep(float(os.environ.get("FAKE_VIPUNE_DELAY", "0")))  # a slow binary, for kill tests
    if os.environ.get("FAKE_VIPUNE_FAULT_MATCH", "") not in query:
        return None
    if fault == "crash":
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    if fault == "garbage":
        sys.stdout.write("this is not JSON {\n")
        return EXIT_OK
    if fault == "empty":
        return EXIT_OK
    if fault == "hang":
        while True:
            time.sleep(3600)
    if fault == "hang-child":
        import subprocess

        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        Path(os.environ["FAKE_VIPUNE_CHILD_PID"]).write_text(str(child.pid))
        while True:
            time.sleep(3600)
    if fault == "error":
        raise VipuneError("injected")
    return None


QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "  # bge's own


def query_input(query: str) -> str:
    """What the model sees of a search's query: the query itself (bge-small's profile has no query
    prefix), or with FAKE_VIPUNE_FAULT=query-prefix bge's retrieval instruction before it."""
    return QUERY_INSTRUCTION + query if os.environ.get("FAKE_VIPUNE_FAULT") == "query-prefix" else query


def cmd_search(args) -> int:
    faulted = inject_search_fault(args.query)
    if faulted is not None:
        return faulted
    config = load_config()
    weight = args.recency if args.recency is not None else config["recency_weight"]
    if not 0.0 <= weight <= 1.0:
        raise VipuneError(f"Invalid recency weight: {weight} (must be between 0.0 and 1.0)")
    use_hybrid = (args.hybrid or config["hybrid"]) and not args.no_hybrid
    query = args.query.strip()
    validate_query(query)
    validate_limit(args.limit)
    conn = open_db(args.db_path)
    query_vec = Embedder().embed(query_input(query))
    project = project_of(args)
    if use_hybrid:
        pool = min(max(args.limit * 10, 50), MAX_SEARCH_LIMIT)
        if os.environ.get("FAKE_VIPUNE_FAULT") == "pool-all":
            pool = MAX_SEARCH_LIMIT
        results = rrf_fusion([semantic_search(conn, project, query_vec, pool), bm25_search(conn, query, project, pool)])
    else:
        results = semantic_search(conn, project, query_vec, args.limit)
    if weight > 0.0:
        results = apply_recency(results, weight)
    results = results[: args.limit]
    fault = os.environ.get("FAKE_VIPUNE_FAULT", "")
    if os.environ.get("FAKE_VIPUNE_FAULT_MATCH", "") not in query:
        fault = ""
    if fault == "repeat-id" and len(results) > 1:
        results[1] = results[0]
    if fault == "over-limit" and results:
        while len(results) <= args.limit:
            results = results + results[:1]

    if not args.no_touch and results:
        ids = [r["id"] for r in results]
        try:
            conn.execute(
                "UPDATE memories SET retrieval_count = retrieval_count + 1, last_retrieved_at = ? "
                f"WHERE id IN ({','.join('?' * len(ids))})",
                [now_rfc3339(), *ids],
            )
        except sqlite3.Error as exc:
            print(f"warning: failed to update retrieval stats: {exc}", file=sys.stderr)

    if args.json:
        print_json(
            {
                "results": [
                    {
                        "id": r["id"],
                        "content": r["content"],
                        "similarity": r["similarity"],
                        "created_at": r["created_at"],
                        "retrieval_count": r["retrieval_count"],
                        "last_retrieved_at": r["last_retrieved_at"],
                        "memory_type": r["memory_type"],
                        "status": r["status"],
                        "importance": r["importance"],
                    }
                    for r in results
                ]
            }
        )
    else:
        for r in results:
            print(f"{r['id']} [score: {r['similarity']:.2f}]\n  {r['content']}\n")
    return EXIT_OK


def _check_row(obj, line_no: int) -> tuple[dict, bytes]:
    if not isinstance(obj, dict):
        raise VipuneError(f"Invalid input: line {line_no}: malformed JSON: row must be an object")
    for key in REQUIRED_STR:
        if key not in obj:
            raise VipuneError(f"Invalid input: line {line_no}: malformed JSON: missing field `{key}`")
        if not isinstance(obj[key], str):
            raise VipuneError(f"Invalid input: line {line_no}: malformed JSON: `{key}` must be a string")
    for key in ("memory_type", "status"):  # required by the real ImportRow
        if not isinstance(obj.get(key), str):
            raise VipuneError(
                f"Invalid input: line {line_no}: malformed JSON: missing field `{key}`"
                if key not in obj
                else f"Invalid input: line {line_no}: malformed JSON: `{key}` must be a string"
            )
    for key in OPTIONAL_STR:
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise VipuneError(f"Invalid input: line {line_no}: malformed JSON: `{key}` must be a string or null")
    if "importance" in obj and obj["importance"] is None:
        raise VipuneError(
            f"Invalid input: line {line_no}: importance must be one of low, medium, high, critical (got null)"
        )
    importance = obj.get("importance", "medium")
    if not isinstance(importance, str) or importance.lower() not in IMPORTANCE_SCALE:
        raise VipuneError(
            f"Invalid input: line {line_no}: Invalid importance '{importance}'. Must be "
            "one of: low, medium, high, critical"
        )
    obj = {**obj, "importance": importance.lower()}
    if "retrieval_count" not in obj:
        raise VipuneError(f"Invalid input: line {line_no}: malformed JSON: missing field `retrieval_count`")
    count = obj["retrieval_count"]
    if isinstance(count, bool) or not isinstance(count, int):
        raise VipuneError(f"Invalid input: line {line_no}: malformed JSON: `retrieval_count` must be an integer")
    if not obj["embedding"]:
        raise VipuneError(f"Invalid input: line {line_no}: empty embedding (NULL/empty blobs are not restorable)")
    try:
        blob = base64.b64decode(obj["embedding"], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise VipuneError(f"Invalid input: line {line_no}: invalid base64 embedding: {exc}") from exc
    if len(blob) != BLOB_BYTES:
        raise VipuneError(
            f"Invalid input: line {line_no}: wrong-dimension embedding: expected "
            f"{BLOB_BYTES} bytes ({EMBEDDING_DIMS}xf32), got {len(blob)} bytes"
        )
    return obj, blob


def _check_header(line: str) -> None:
    """What 0.20.2's importer checks of line 1: type, a version key (either name, any value),
    rows (any count), and the model it names (default: bge-small) against the database's."""
    try:
        header = json.loads(line)
    except json.JSONDecodeError as exc:
        raise VipuneError(f"Invalid input: line 1: malformed header JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise VipuneError("Invalid input: line 1: header must be a JSON object")
    if header.get("type") != "export":
        raise VipuneError("Invalid input: line 1: not an export file (missing type=export)")
    if "format_version" not in header and "version" not in header:
        raise VipuneError('Invalid input: line 1: header missing format_version (or the legacy alias "version")')
    rows = header.get("rows")
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise VipuneError("Invalid input: line 1: header missing rows")
    # A fresh database records no model: it counts as the default, bge-small at its revision.
    source = (
        header.get("model_id") if isinstance(header.get("model_id"), str) else MODEL_ID,
        header.get("model_revision") if isinstance(header.get("model_revision"), str) else MODEL_REVISION,
    )
    if source != (MODEL_ID, MODEL_REVISION):
        raise VipuneError(
            f"Invalid input: import refused: export was produced with model {source[0]}@{source[1]} "
            f"but the destination database uses {MODEL_ID}@{MODEL_REVISION}. Re-import into a store "
            "embedded with the same model, or complete the migration with `vipune reindex --force`."
        )


def cmd_import(args) -> int:
    # The real import is handed the detected project, so it always warns.
    print(
        f"warning: --project ({project_of(args)}) is ignored for import; import restores all projects in the file",
        file=sys.stderr,
    )
    try:
        inserted, skipped = _import(args)
    except VipuneError as exc:
        print(f"Import failed: {exc}", file=sys.stderr)
        raise VipuneError(f"Invalid input: {exc}") from None  # wrapped once more, as vipune does
    if args.json:
        print_json({"inserted": inserted, "skipped": skipped})
    else:
        print(f"Import complete: {inserted} inserted, {skipped} skipped (already present)")
    return EXIT_OK


def _import(args) -> tuple[int, int]:
    conn = open_db(args.db_path, busy_timeout=IMPORT_BUSY_TIMEOUT_S)
    skip = {r[0] for r in conn.execute("SELECT id FROM memories")}

    source = args.source or "-"
    try:
        if source == "-":
            text = sys.stdin.buffer.read().decode("utf-8")
        else:
            text = Path(source).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise VipuneError(f"Invalid input: cannot read import source '{source}': {exc}") from exc
    # Rust str::lines splits on \n only (a trailing \r is stripped per line below), never on
    # U+2028 and friends, which serde_json writes raw inside strings: no str.splitlines().
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if not lines:
        raise VipuneError("Invalid input: import source is empty (no header line)")
    _check_header(lines[0].rstrip("\r"))

    parsed: list[tuple[int, dict, bytes]] = []
    for idx, line in enumerate(lines[1:], start=2):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise VipuneError(f"Invalid input: line {idx}: malformed JSON: {exc}") from exc
        row, blob = _check_row(obj, idx)
        parsed.append((idx, row, blob))

    # Every line was read before the transaction; an id twice in the file fails its INSERT
    # (the primary key), which rolls the whole import back.
    inserted = skipped = 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        for _line_no, row, blob in parsed:
            if row["id"] in skip:
                skipped += 1
                continue
            conn.execute(
                "INSERT INTO memories (id, project_id, content, metadata, embedding, created_at, "
                "updated_at, memory_type, status, superseded_by, retrieval_count, "
                "last_retrieved_at, importance) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    row["id"],
                    row["project_id"],
                    row["content"],
                    row.get("metadata"),
                    blob,
                    row["created_at"],
                    row["updated_at"],
                    row["memory_type"],
                    row["status"],
                    row.get("superseded_by"),
                    row["retrieval_count"],
                    row.get("last_retrieved_at"),
                    row["importance"],
                ),
            )
            inserted += 1
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        conn.execute("ROLLBACK")
        raise VipuneError(f"Database error: {exc}") from exc

    if os.environ.get("FAKE_VIPUNE_FAULT") == "short-import":
        inserted = max(inserted - 1, 0)
    return inserted, skipped


def cmd_add(args) -> int:
    config = load_config()
    text = args.text
    validate_query(text)
    conn = open_db(args.db_path)
    project = project_of(args)
    vec = Embedder().embed(text)
    if not args.force:
        conflicts = [
            r
            for r in semantic_search(conn, project, vec, MAX_SEARCH_LIMIT)
            if r["similarity"] >= config["similarity_threshold"]
        ]
        if conflicts:
            if args.json:
                print_json(
                    {
                        "status": "conflicts",
                        "proposed": text,
                        "conflicts": [
                            {"id": c["id"], "content": c["content"], "similarity": c["similarity"]} for c in conflicts
                        ],
                    }
                )
            else:
                print(f"Conflicts detected: {len(conflicts)} similar memory/memories found")
            return EXIT_CONFLICTS
    import uuid

    new_id = str(uuid.uuid4())
    now = now_rfc3339()
    conn.execute(
        "INSERT INTO memories (id, project_id, content, metadata, embedding, created_at, "
        "updated_at, memory_type, status, importance) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (
            new_id,
            project,
            text,
            args.metadata,
            vec_to_blob(vec),
            now,
            now,
            args.memory_type,
            args.status,
            args.importance,
        ),
    )
    if args.json:
        print_json({"status": "added", "id": new_id})
    else:
        print(f"Added memory: {new_id}")
    return EXIT_OK


def cmd_export(args) -> int:
    """Rows in the import format, keys sorted (serde_json's map), the header without the legacy
    ``version``. ``-`` is not stdout: the real one creates a file named ``-``."""
    conn = open_db(args.db_path)
    rows = conn.execute(f"SELECT {', '.join(ROW_FIELDS)} FROM memories ORDER BY rowid").fetchall()
    header = {
        "type": "export",
        "format_version": 1,
        "embedding_dims": EMBEDDING_DIMS,
        "model_id": MODEL_ID,
        "model_revision": MODEL_REVISION,
        "exported_at": now_rfc3339(),
        "rows": len(rows),
    }
    out_lines = [json.dumps(header, ensure_ascii=False, sort_keys=True, separators=(",", ":"))]
    for values in rows:
        row = dict(zip(ROW_FIELDS, values))
        row["embedding"] = base64.b64encode(row["embedding"] or b"").decode("ascii")
        out_lines.append(json.dumps(row, ensure_ascii=False, sort_keys=True, separators=(",", ":")))
    data = "\n".join(out_lines) + "\n"
    try:
        Path(args.output_path).write_text(data, encoding="utf-8")
    except OSError as exc:
        raise VipuneError(f"Configuration error: cannot create {args.output_path}: {exc}") from exc
    if args.json:
        print_json({"rows": len(rows), "format_version": 1, "path": args.output_path})
    else:
        print(f"Exported {len(rows)} row(s) to {args.output_path}")
    return EXIT_OK


def fts_report(conn) -> dict:
    """src/sqlite/fts.rs detect_fts_desync, query for query. On an external-content FTS5 table a
    rowid look-up reads the content table, so neither direction sees an index emptied or
    filled behind vipune's back: the real `doctor --fts` is blind to that, and so is this."""
    missing = dict(
        conn.execute(
            "SELECT m.project_id, COUNT(*) AS c FROM memories m WHERE m.rowid IS NOT "
            "(SELECT fts.rowid FROM memories_fts fts WHERE fts.rowid = m.rowid) GROUP BY m.project_id"
        )
    )
    orphans = len(
        conn.execute(
            "SELECT fts.rowid FROM memories_fts fts WHERE fts.rowid IS NOT "
            "(SELECT m.rowid FROM memories m WHERE m.rowid = fts.rowid)"
        ).fetchall()
    )
    counts = dict(conn.execute("SELECT project_id, COUNT(*) FROM memories GROUP BY project_id"))
    total = sum(missing.values()) + orphans
    return {
        "in_sync": total == 0,
        "underpopulated_by_project": [
            {"project_id": p, "memory_rows": counts.get(p, 0), "missing_from_fts": n}
            for p, n in sorted(missing.items())
        ],
        "orphan_rows": orphans,
        "total_desynced": total,
    }


def cmd_doctor(args) -> int:
    modes = [m for m in ("embeddings", "projects", "fts") if getattr(args, m)]
    if len(modes) != 1:
        raise UsageError("exactly one of --embeddings, --projects, --fts is required")
    if modes[0] != "fts":
        raise VipuneError(f"doctor --{modes[0]} is not implemented by the fake vipune")
    conn = open_db(args.db_path)
    report = fts_report(conn)
    actions = 0
    if args.repair and not report["in_sync"]:
        conn.execute("INSERT INTO memories_fts(memories_fts) VALUES('rebuild')")
        before = report["total_desynced"]
        report = fts_report(conn)
        actions = report["total_desynced"] + before
    report.update(repaired=bool(args.repair), actions=actions)
    if args.json:
        print_json(report)
    elif report["in_sync"]:
        print("FTS index is in sync with the memories table.")
    else:
        print(
            f"Warning: FTS index is desynced: {report['total_desynced']} rows. Run "
            "'vipune doctor --fts --repair' to rebuild."
        )
    return EXIT_OK


# --------------------------------------------------------------------------- CLI
class Parser(argparse.ArgumentParser):
    """argparse with clap's exit code for usage errors (64, not 2)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)  # clap does not infer long flags
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise UsageError(f"{self.prog}: error: {message}")


def non_negative_int(text: str) -> int:
    value = int(text)  # ValueError -> argparse usage error
    if value < 0:
        raise ValueError(text)
    return value


def add_globals(parser: argparse.ArgumentParser, top: bool) -> None:
    # clap `global = true`: accepted before and after the subcommand. On subparsers the
    # default is SUPPRESS so a value given before the subcommand is not overwritten.
    d = {} if top else {"default": argparse.SUPPRESS}
    parser.add_argument("--json", action="store_true", **({"default": False} if top else d))
    parser.add_argument("-p", "--project", **({"default": None} if top else d))
    parser.add_argument("--db-path", **({"default": None} if top else d))


def build_parser() -> Parser:
    parser = Parser(prog="vipune", description="Minimal memory layer for AI agents (fake)")
    add_globals(parser, top=True)
    sub = parser.add_subparsers(dest="command", parser_class=Parser)

    p = sub.add_parser("version")
    add_globals(p, top=False)
    p.set_defaults(func=cmd_version)

    p = sub.add_parser("search")
    add_globals(p, top=False)
    p.add_argument("query")
    p.add_argument("-l", "--limit", type=non_negative_int, default=5)
    p.add_argument("--recency", type=float, default=None)
    p.add_argument("--hybrid", action="store_true")
    p.add_argument("--no-hybrid", action="store_true")
    p.add_argument("--no-touch", action="store_true")
    p.set_defaults(func=cmd_search)

    old_release = os.environ.get("FAKE_VIPUNE_FAULT") == "no-import"
    p = sub.add_parser("import" if not old_release else "import-not-in-this-release")
    add_globals(p, top=False)
    p.add_argument("source", nargs="?")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("add")
    add_globals(p, top=False)
    p.add_argument("text")
    p.add_argument("-m", "--metadata", default=None)
    p.add_argument("--force", action="store_true")
    p.add_argument("--memory-type", default="fact")
    p.add_argument("--status", default="active")
    p.add_argument("--importance", default="medium")
    p.set_defaults(func=cmd_add)

    p = sub.add_parser("export" if not old_release else "export-not-in-this-release")
    add_globals(p, top=False)
    p.add_argument("output_path")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("doctor")
    add_globals(p, top=False)
    for flag in ("--embeddings", "--projects", "--fts", "--repair"):
        p.add_argument(flag, action="store_true")
    p.set_defaults(func=cmd_doctor)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            raise UsageError("vipune: error: a subcommand is required")
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    try:
        prepare_home()  # every command, version included, as the real binary does
        open_db(args.db_path).close()
        return args.func(args)
    except UsageError as exc:
        print(f"vipune {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (VipuneError, sqlite3.Error) as exc:
        if isinstance(exc, sqlite3.Error):
            exc = VipuneError(f"Database error: {exc}")
        if args.json:
            print_json({"error": str(exc)})
        else:
            print(f"Error: {exc}", file=sys.stderr)
        return exc.code


if __name__ == "__main__":
    sys.exit(main())
