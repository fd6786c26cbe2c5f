"""The fake vipune (tests/support/fake_vipune.py) keeps the contract in docs/vipune-contract.md, and
does what the real vipune does.

Every test runs as a subprocess through a ``vipune`` on PATH, the way the harness runs the
binary, with a private HOME and XDG_CONFIG_HOME, no VIPUNE_* variables and no network; and every
test runs twice: on the fake and on the real vipune at the pinned release (built by
.ci/vipune/build.sh; that half is marked ``real_vipune`` and skipped, saying why, where it is not
built). The real binary is the reference: where the two differ, the fake is wrong. Tests of the
fake's fault injection run on the fake only.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from tokenizers import Tokenizer

from support.tinymodel import build_tiny_model
from vipune_eval.vipune.contract import EMBED_MODEL_ID, EMBED_MODEL_REVISION
from vipune_eval.vipune.home import build_vipune_hf_home
from vipune_eval.vipune.release import RELEASE

DIM = 384
QUERY = "tomato garden"


# --------------------------------------------------------------------------- helpers
@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.real_vipune)])
def binary(request) -> str:
    return request.param


@pytest.fixture
def env(tmp_path: Path, binary: str, request, vipune_hf_home: Path) -> dict[str, str]:
    """The environment of a call: ``vipune`` (the fake or the real one) first on PATH, a private
    HOME (the calls' working directory too), the tiny model where vipune looks, no network (a hub
    request is refused at once: the proxy is a closed port)."""
    executable = request.getfixturevalue("fake_vipune_bin" if binary == "fake" else "real_vipune_bin")
    base = {
        k: v for k, v in os.environ.items() if not k.startswith(("VIPUNE_", "FAKE_VIPUNE_")) and k.lower() != "no_proxy"
    }
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    home.mkdir()
    xdg.mkdir()
    return {
        **base,
        "PATH": f"{executable.parent}{os.pathsep}{base.get('PATH', '')}",
        "HOME": str(home),
        "HF_HOME": str(vipune_hf_home),
        "HF_HUB_OFFLINE": "1",
        "ALL_PROXY": "http://127.0.0.1:9",
        "XDG_CONFIG_HOME": str(xdg),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }


# Tests of the fake's own knobs (fault injection, its version variable): the fake only.
fake_only = pytest.mark.parametrize("binary", ["fake"])


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memories.db"


def vipune(
    env: dict[str, str], *args: str, stdin: str | None = None, timeout: float = 60, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["vipune", *args],
        env={**env, **extra_env},
        input=stdin,
        cwd=env["HOME"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ok_json(proc: subprocess.CompletedProcess[str]):
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    return json.loads(proc.stdout)


def search(
    env, db: Path, query: str, *flags: str, project: str = "p1", limit: int = 10, **extra_env: str
) -> list[dict]:
    proc = vipune(
        env,
        "--db-path",
        str(db),
        "--project",
        project,
        "--json",
        "search",
        *flags,
        "--limit",
        str(limit),
        "--no-touch",
        "--",
        query,
        **extra_env,
    )
    return ok_json(proc)["results"]


def b64(vec) -> str:
    return base64.b64encode(np.asarray(vec, "<f4").tobytes()).decode("ascii")


def header(**over) -> dict:
    return {
        "type": "export",
        "version": 1,
        "format_version": 1,
        "embedding_dims": DIM,
        "model_id": EMBED_MODEL_ID,
        "model_revision": EMBED_MODEL_REVISION,
        "exported_at": "2024-01-01T00:00:00Z",
        "rows": 0,
        **over,
    }


def row(
    id_: str, vec, content: str = "some text", project: str = "p1", created_at: str = "2024-01-01T00:00:00Z", **over
) -> dict:
    return {
        "id": id_,
        "project_id": project,
        "content": content,
        "metadata": None,
        "embedding": b64(vec),
        "created_at": created_at,
        "updated_at": created_at,
        "memory_type": "fact",
        "status": "active",
        "superseded_by": None,
        "retrieval_count": 0,
        "last_retrieved_at": None,
        "importance": "medium",
        **over,
    }


def write_jsonl(path: Path, rows: list[dict], hdr: dict | None = None) -> Path:
    lines = [hdr if hdr is not None else header(rows=len(rows)), *rows]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def import_rows(env, db: Path, tmp_path: Path, rows: list[dict]) -> dict:
    src = write_jsonl(tmp_path / "import.jsonl", rows)
    return ok_json(vipune(env, "--db-path", str(db), "--json", "import", str(src)))


def db_count(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM memories").fetchone()[0]


def reference_embed(model_dir: Path, text: str) -> np.ndarray:
    """vipune's recipe written out independently: mean pooling over the mask, then L2."""
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    enc = tokenizer.encode(text)
    ids = np.array([enc.ids], dtype=np.int64)
    mask = np.array([enc.attention_mask], dtype=np.int64)
    session = ort.InferenceSession(str(model_dir / "model.onnx"), providers=["CPUExecutionProvider"])
    (hidden,) = session.run(
        ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    )
    pooled = (hidden[0] * mask[0][:, None]).sum(axis=0) / mask.sum()
    return (pooled / np.linalg.norm(pooled)).astype(np.float32)


@pytest.fixture(scope="module")
def qvec(vipune_tiny_model_dir: Path) -> np.ndarray:
    return reference_embed(vipune_tiny_model_dir, QUERY)


def at_cosine(q: np.ndarray, cos: float, seed: int) -> np.ndarray:
    """A unit vector whose cosine with unit vector q is exactly-ish ``cos``."""
    r = np.random.default_rng(seed).standard_normal(DIM)
    r -= (r @ q) * q
    r /= np.linalg.norm(r)
    return (cos * q + np.sqrt(1 - cos**2) * r).astype(np.float32)


# --------------------------------------------------------------------------- version, CLI
def test_version_json(env) -> None:
    proc = vipune(env, "--json", "version")
    assert proc.stdout == f'{{\n  "name": "vipune",\n  "version": "{RELEASE}"\n}}\n'
    assert vipune(env, "version").stdout == f"vipune {RELEASE}\n"
    assert vipune(env, "--version").returncode == 64  # no such flag: the subcommand only


@fake_only
def test_the_fake_takes_its_version_from_the_environment(env) -> None:
    assert ok_json(vipune(env, "version", "--json", FAKE_VIPUNE_VERSION="9.9.9")) == {
        "name": "vipune",
        "version": "9.9.9",
    }


@pytest.mark.parametrize(
    "args",
    [
        ["search", "--bogus", "q"],
        ["search"],
        ["search", "--limit", "ten", "q"],
        ["search", "--lim", "3", "q"],  # clap infers no abbreviations
        ["frobnicate"],
        [],
        ["doctor"],
    ],
)
def test_usage_errors_exit_64(env, db, args) -> None:
    proc = vipune(env, "--db-path", str(db), "--json", *args)
    assert proc.returncode == 64, (proc.stdout, proc.stderr)


def test_global_flags_after_subcommand(env, db, tmp_path, qvec) -> None:
    import_rows(env, db, tmp_path, [row("a", qvec, project="p9")])
    proc = vipune(env, "search", "--json", "--db-path", str(db), "-p", "p9", "--no-touch", "--", QUERY)
    assert [r["id"] for r in ok_json(proc)["results"]] == ["a"]


# --------------------------------------------------------------------------- import
def test_import_then_reimport_skips(env, db, tmp_path, qvec) -> None:
    rows = [row("a", qvec), row("b", at_cosine(qvec, 0.5, 1))]
    assert import_rows(env, db, tmp_path, rows) == {"inserted": 2, "skipped": 0}
    assert import_rows(env, db, tmp_path, rows) == {"inserted": 0, "skipped": 2}
    assert import_rows(env, db, tmp_path, [*rows, row("c", qvec)]) == {"inserted": 1, "skipped": 2}
    assert db_count(db) == 3


def test_import_from_stdin_and_project_warning(env, db, qvec) -> None:
    # serde_json writes U+2028 raw inside strings: only "\n" ends a line (CRLF tolerated).
    content = "first\u2028second\x0cthird"
    text = (
        json.dumps(header(rows=1)) + "\r\n" + json.dumps(row("a", qvec, content=content), ensure_ascii=False) + "\r\n"
    )
    proc = vipune(env, "--db-path", str(db), "--project", "zz", "--json", "import", "-", stdin=text)
    assert ok_json(proc) == {"inserted": 1, "skipped": 0}
    assert "ignored" in proc.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT content FROM memories").fetchone()[0] == content


def _bad_lines(qvec) -> dict[str, str]:
    good = row("x", qvec)
    return {
        "malformed-json": '{"id": "x", ',
        "bad-base64": json.dumps({**good, "embedding": "not*base64!"}),
        "wrong-length": json.dumps({**good, "embedding": b64(qvec[:383])}),
        "empty-embedding": json.dumps({**good, "embedding": ""}),
        "missing-field": json.dumps({k: v for k, v in good.items() if k != "retrieval_count"}),
        "duplicate-id": json.dumps(row("a", qvec)),
    }


@pytest.mark.parametrize(
    "kind", ["malformed-json", "bad-base64", "wrong-length", "empty-embedding", "missing-field", "duplicate-id"]
)
def test_import_bad_line_aborts_everything(env, db, tmp_path, qvec, kind) -> None:
    lines = [json.dumps(header(rows=3)), json.dumps(row("a", qvec)), _bad_lines(qvec)[kind], json.dumps(row("b", qvec))]
    src = tmp_path / "bad.jsonl"
    src.write_text("\n".join(lines) + "\n")
    proc = vipune(env, "--db-path", str(db), "--json", "import", str(src))
    assert proc.returncode == 1
    error = json.loads(proc.stdout)["error"]
    # A duplicate id passes every line's check and fails its INSERT, naming no line.
    assert ("UNIQUE constraint failed: memories.id" if kind == "duplicate-id" else "line 3") in error
    assert error.startswith("Invalid input: ") and f"Import failed: {error[15:]}" in proc.stderr
    assert db_count(db) == 0


@pytest.mark.parametrize(
    "hdr, message",
    [
        (
            {k: v for k, v in header().items() if k not in ("version", "format_version")},
            'line 1: header missing format_version (or the legacy alias "version")',
        ),
        ({k: v for k, v in header().items() if k != "rows"}, "line 1: header missing rows"),
        (header(type="backup"), "line 1: not an export file (missing type=export)"),
        (
            header(model_id="intfloat/e5-small-v2"),
            "import refused: export was produced with model "
            f"intfloat/e5-small-v2@{EMBED_MODEL_REVISION} but the destination database uses "
            f"{EMBED_MODEL_ID}@{EMBED_MODEL_REVISION}",
        ),
        (
            header(model_revision="0" * 40),
            "import refused: export was produced with model "
            f"BAAI/bge-small-en-v1.5@{'0' * 40} but the destination database uses ",
        ),
    ],
)
def test_import_bad_header_refused(env, db, tmp_path, qvec, hdr, message) -> None:
    src = write_jsonl(tmp_path / "bad.jsonl", [row("a", qvec)], hdr=hdr)
    proc = vipune(env, "--db-path", str(db), "--json", "import", str(src))
    assert proc.returncode == 1
    # The message is wrapped twice over ("Invalid input: Invalid input: …"), and said on stderr.
    assert json.loads(proc.stdout)["error"].startswith(f"Invalid input: Invalid input: {message}")
    assert f"Import failed: Invalid input: {message}" in proc.stderr
    assert db_count(db) == 0


@pytest.mark.parametrize(
    "hdr", [header(format_version=2), header(version=2, format_version=7), header(embedding_dims=768), header(rows=99)]
)
def test_import_does_not_check_the_version_value_the_dims_or_the_row_count(env, db, tmp_path, qvec, hdr) -> None:
    """0.20.2 reads only the presence of a version key, and rows as a number: the harness may not
    rely on the header to catch wrong vectors (the rows' byte length is checked)."""
    src = write_jsonl(tmp_path / "odd.jsonl", [row("a", qvec)], hdr=hdr)
    assert ok_json(vipune(env, "--db-path", str(db), "--json", "import", str(src)))["inserted"] == 1


# --------------------------------------------------------------------------- search
def test_search_output_shape(env, db, tmp_path, qvec) -> None:
    import_rows(env, db, tmp_path, [row("a", qvec, content="tomato garden notes", metadata='{"k": 1}')])
    proc = vipune(
        env,
        "--db-path",
        str(db),
        "--project",
        "p1",
        "--json",
        "search",
        "--hybrid",
        "--recency",
        "0",
        "--limit",
        "10",
        "--no-touch",
        "--",
        QUERY,
    )
    assert proc.stdout.startswith('{\n  "results": [')  # pretty-printed
    (hit,) = ok_json(proc)["results"]
    assert hit == {
        "id": "a",
        "content": "tomato garden notes",
        "similarity": pytest.approx(2 / 26),
        "created_at": "2024-01-01T00:00:00Z",
        "retrieval_count": 0,
        "last_retrieved_at": None,
        "memory_type": "fact",
        "status": "active",
        "importance": "medium",
    }
    assert list(hit) == [
        "id",
        "content",
        "similarity",
        "created_at",
        "retrieval_count",
        "last_retrieved_at",
        "memory_type",
        "status",
        "importance",
    ]


@pytest.mark.parametrize(
    "hdr",
    [
        {k: v for k, v in header().items() if k != "format_version"},  # an older exporter
        {k: v for k, v in header().items() if k != "version"},  # a newer one
        {k: v for k, v in header().items() if k not in ("model_id", "model_revision")},
    ],
)
def test_import_accepts_either_header_key_and_a_header_without_model(env, db, tmp_path, qvec, hdr) -> None:
    src = write_jsonl(tmp_path / "ok.jsonl", [row("a", qvec)], hdr=hdr)
    assert ok_json(vipune(env, "--db-path", str(db), "--json", "import", str(src)))["inserted"] == 1


@pytest.mark.parametrize("field", ["memory_type", "status", "retrieval_count"])
def test_import_requires_the_fields_the_real_importrow_requires(env, db, tmp_path, qvec, field) -> None:
    bad = {k: v for k, v in row("a", qvec).items() if k != field}
    src = write_jsonl(tmp_path / "bad.jsonl", [bad])
    proc = vipune(env, "--db-path", str(db), "--json", "import", str(src))
    assert proc.returncode == 1 and f"missing field `{field}`" in json.loads(proc.stdout)["error"]


def test_a_user_config_model_leaks_into_an_unisolated_call(env, db, tmp_path, qvec) -> None:
    """vipune reads config.toml from the config dir (on macOS under HOME): the harness must hide it."""
    import_rows(env, db, tmp_path, [row("a", qvec)])
    config = tmp_path / "xdg" / "vipune"
    config.mkdir(parents=True)
    (config / "config.toml").write_text('embedding_model = "intfloat/e5-small"\n')
    proc = vipune(
        env, "--db-path", str(db), "--project", "p1", "--json", "search", "--limit", "3", "--no-touch", "--", QUERY
    )
    assert proc.returncode == 1 and "intfloat/e5-small" in json.loads(proc.stdout)["error"]


def test_query_starting_with_dash_needs_double_dash(env, db, tmp_path, qvec) -> None:
    import_rows(env, db, tmp_path, [row("a", qvec)])
    assert [r["id"] for r in search(env, db, "-tomato garden")] == ["a"]
    proc = vipune(env, "--db-path", str(db), "--json", "search", "-tomato")
    assert proc.returncode == 64


def test_the_project_flag_is_trimmed(env, db, tmp_path, qvec) -> None:
    """--project " p1 " searches p1; a row whose project_id has outer spaces is out of reach."""
    import_rows(env, db, tmp_path, [row("a", qvec), row("b", qvec, project=" p2")])
    assert [h["id"] for h in search(env, db, QUERY, project="  p1 ")] == ["a"]
    assert search(env, db, QUERY, project=" p2") == []


@pytest.mark.parametrize(
    "importance, error", [("HIGH", None), (None, "(got null)"), ("normal", "Invalid importance 'normal'")]
)
def test_import_reads_importance_case_blind_and_refuses_others(env, db, tmp_path, qvec, importance, error) -> None:
    src = write_jsonl(tmp_path / "i.jsonl", [row("a", qvec, importance=importance)])
    proc = vipune(env, "--db-path", str(db), "--json", "import", str(src))
    if error is None:
        assert ok_json(proc)["inserted"] == 1
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT importance FROM memories").fetchone()[0] == "high"
    else:
        assert proc.returncode == 1 and error in json.loads(proc.stdout)["error"]


def test_rows_visible_only_under_their_project(env, db, tmp_path, qvec) -> None:
    import_rows(
        env,
        db,
        tmp_path,
        [row("a", qvec, project="alice", content=QUERY), row("b", qvec, project="bob", content=QUERY)],
    )
    # Hybrid runs both arms (semantic and BM25) through the project filter.
    assert [r["id"] for r in search(env, db, QUERY, "--hybrid", project="alice")] == ["a"]
    assert [r["id"] for r in search(env, db, QUERY, "--hybrid", project="bob")] == ["b"]
    assert search(env, db, QUERY, "--hybrid", project="default") == []


def test_semantic_order_is_cosine_and_ties_go_to_newer(env, db, tmp_path, qvec) -> None:
    same = at_cosine(qvec, 0.6, 7)
    rows = [
        row("r30", at_cosine(qvec, 0.3, 1)),
        row("r90", at_cosine(qvec, 0.9, 2)),
        row("rneg", at_cosine(qvec, -0.5, 3)),
        row("r100", qvec),
        row("tie-a", same, created_at="2023-01-01T00:00:00Z"),
        row("tie-b", same, created_at="2024-06-01T00:00:00Z"),
    ]
    import_rows(env, db, tmp_path, rows)
    hits = search(env, db, QUERY, "--no-hybrid", "--recency", "0")
    # Exact tie: the newer created_at first, although its id is the larger one.
    assert [h["id"] for h in hits] == ["r100", "r90", "tie-b", "tie-a", "r30", "rneg"]
    assert [h["similarity"] for h in hits] == pytest.approx([1, 0.9, 0.6, 0.6, 0.3, -0.5], abs=1e-5)
    assert [h["id"] for h in search(env, db, QUERY, "--recency", "0", limit=2)] == ["r100", "r90"]


def test_hybrid_returns_bm25_only_row(env, db, tmp_path, qvec) -> None:
    # 60 rows near the query fill the semantic pool (clamp(10 * 5, 50, 10000) = 50); the
    # target points away from the query but is the only row containing both query words.
    fillers = [row(f"f{i:02d}", at_cosine(qvec, 0.9 - i / 100, i), content=f"tomato note {i}") for i in range(60)]
    target = row("target", -qvec, content="my garden has one tomato plant")
    import_rows(env, db, tmp_path, [*fillers, target])
    semantic = search(env, db, QUERY, "--no-hybrid", "--recency", "0", limit=5)
    assert "target" not in [h["id"] for h in semantic]
    hybrid = search(env, db, QUERY, "--hybrid", "--recency", "0", limit=5)
    by_id = {h["id"]: h["similarity"] for h in hybrid}
    # Rank 1 in BM25, outside the semantic pool: exactly 1/26, tied with f00 (semantic
    # rank 1, no BM25 hit) and placed after it (ties go to the smaller id).
    assert by_id["target"] == pytest.approx(1 / 26, abs=1e-12)
    assert [h["id"] for h in hybrid][:2] == ["f00", "target"]


def test_rrf_tie_goes_to_smaller_id(env, db, tmp_path, qvec) -> None:
    # "zeta" is semantic rank 1 and BM25 rank 2; "alpha" the reverse: equal RRF scores.
    rows = [
        row("zeta", qvec, content="tomato garden with plenty of other words in it today"),
        row("alpha", at_cosine(qvec, 0.8, 1), content="tomato garden tomato garden"),
        row("other", at_cosine(qvec, 0.1, 2), content="nothing relevant"),
    ]
    import_rows(env, db, tmp_path, rows)
    hits = search(env, db, QUERY, "--hybrid", "--recency", "0")
    assert [h["id"] for h in hits] == ["alpha", "zeta", "other"]
    assert hits[0]["similarity"] == hits[1]["similarity"] == pytest.approx(1 / 26 + 1 / 27)


def test_recency_changes_scores_only_when_positive(env, db, tmp_path, qvec) -> None:
    import_rows(
        env,
        db,
        tmp_path,
        [
            row("old", qvec, created_at="2000-01-01T00:00:00Z"),
            row("new", at_cosine(qvec, 0.8, 1), created_at="2099-01-01T00:00:00Z"),
        ],
    )
    assert [h["id"] for h in search(env, db, QUERY, "--recency", "0")] == ["old", "new"]
    assert [h["id"] for h in search(env, db, QUERY, "--recency", "0.9")] == ["new", "old"]
    assert vipune(env, "--db-path", str(db), "--json", "search", "--recency", "1.5", "q").returncode == 1


def test_config_and_env_are_defaults_that_flags_override(env, db, tmp_path, qvec) -> None:
    import_rows(
        env,
        db,
        tmp_path,
        [
            row("old", qvec, created_at="2000-01-01T00:00:00Z"),
            row("new", at_cosine(qvec, 0.8, 1), created_at="2099-01-01T00:00:00Z", content=QUERY),
        ],
    )
    # No flags: the built-in default recency 0.3 applies (old decays to ~0.7).
    assert [h["id"] for h in search(env, db, QUERY)] == ["new", "old"]
    assert [h["id"] for h in search(env, db, QUERY, VIPUNE_RECENCY_WEIGHT="0")] == ["old", "new"]
    config = Path(env["XDG_CONFIG_HOME"]) / "vipune" / "config.toml"
    config.parent.mkdir()
    config.write_text("recency_weight = 0.0\nhybrid = true\n")
    # `hybrid` is no key of the config file (ignored): semantic, no recency, exact cosines.
    assert [h["similarity"] for h in search(env, db, QUERY)] == pytest.approx([1.0, 0.8], abs=1e-5)
    hits = search(env, db, QUERY, VIPUNE_HYBRID="true")  # hybrid, no recency: exact RRF scores
    assert hits[0]["similarity"] == pytest.approx(1 / 26 + 1 / 27)
    assert [
        h["id"] for h in search(env, db, QUERY, "--no-hybrid", VIPUNE_HYBRID="false", VIPUNE_RECENCY_WEIGHT="0.9")
    ] == ["new", "old"]
    assert [h["id"] for h in search(env, db, QUERY, "--no-hybrid", "--recency", "0", VIPUNE_RECENCY_WEIGHT="0.9")] == [
        "old",
        "new",
    ]


@pytest.mark.parametrize("limit", ["0", "10001"])
def test_limit_out_of_range_is_an_error(env, db, limit) -> None:
    proc = vipune(env, "--db-path", str(db), "--json", "search", "--limit", limit, "q")
    assert proc.returncode == 1
    assert "limit" in json.loads(proc.stdout)["error"].lower()


def test_limit_10000_is_accepted(env, db) -> None:
    assert ok_json(
        vipune(env, "--db-path", str(db), "--json", "search", "--limit", "10000", "--hybrid", "--", "q")
    ) == {"results": []}


def test_query_token_limit(env, db) -> None:
    # The tiny tokenizer adds [CLS] and [SEP]: 510 words are 512 tokens, 511 are 513.
    assert (
        ok_json(vipune(env, "--db-path", str(db), "--json", "search", "--", " ".join(["tomato"] * 510)))["results"]
        == []
    )
    proc = vipune(env, "--db-path", str(db), "--json", "search", "--", " ".join(["tomato"] * 511))
    assert proc.returncode == 3
    assert "513" in json.loads(proc.stdout)["error"]
    proc = vipune(env, "--db-path", str(db), "--json", "add", "--force", " ".join(["a"] * 600))
    assert proc.returncode == 3


def test_empty_query_is_an_error(env, db) -> None:
    proc = vipune(env, "--db-path", str(db), "--json", "search", "--", "   ")
    assert proc.returncode == 1
    assert "empty" in json.loads(proc.stdout)["error"]


def test_search_touches_hits_unless_no_touch(env, db, tmp_path, qvec) -> None:
    import_rows(env, db, tmp_path, [row("a", qvec)])
    search(env, db, QUERY)  # --no-touch
    ok_json(vipune(env, "--db-path", str(db), "-p", "p1", "--json", "search", "--", QUERY))
    with sqlite3.connect(db) as conn:
        count, last = conn.execute("SELECT retrieval_count, last_retrieved_at FROM memories").fetchone()
    assert count == 1 and last is not None


def test_missing_model_names_the_path(env, db, tmp_path) -> None:
    empty = tmp_path / "empty_hf"
    empty.mkdir()
    proc = vipune(env, "--db-path", str(db), "--json", "search", "--", "q", HF_HOME=str(empty))
    assert proc.returncode == 1
    assert str(empty) in json.loads(proc.stdout)["error"]


# --------------------------------------------------------------------------- doctor, add, export
def test_doctor_fts_cannot_see_an_index_emptied_behind_its_back(env, db, tmp_path, qvec) -> None:
    """0.20.2's desync queries look rowids up through the external-content table, which answers
    for the index: an emptied index reads as in sync, and --repair then rebuilds nothing. The
    preflight's BM25 probes, not `doctor`, are what shows imported rows are indexed."""
    import_rows(env, db, tmp_path, [row("a", qvec, content=QUERY), row("b", qvec)])
    doctor = ["--db-path", str(db), "--json", "doctor", "--fts"]
    in_sync = {
        "in_sync": True,
        "underpopulated_by_project": [],
        "orphan_rows": 0,
        "total_desynced": 0,
        "repaired": False,
        "actions": 0,
    }
    assert ok_json(vipune(env, *doctor)) == in_sync
    assert len(search(env, db, QUERY, "--hybrid", "--recency", "0")) == 2
    with sqlite3.connect(db) as conn:  # empty the index behind vipune's back
        conn.execute("INSERT INTO memories_fts(memories_fts) VALUES('delete-all')")
    assert ok_json(vipune(env, *doctor)) == in_sync
    assert ok_json(vipune(env, *doctor, "--repair")) == {**in_sync, "repaired": True}
    # BM25 finds nothing now: the hybrid scores are the semantic arm's alone, 1 / (25 + rank).
    hits = search(env, db, QUERY, "--hybrid", "--recency", "0")
    assert [h["similarity"] for h in hits] == pytest.approx([1 / 26, 1 / 27])


def test_add_export_roundtrip_is_the_mean_pooled_vector(env, db, tmp_path, vipune_tiny_model_dir) -> None:
    text = "My puppy needs a new leash."
    added = ok_json(vipune(env, "--db-path", str(db), "-p", "probe", "--json", "add", text, "--force"))
    assert added["status"] == "added"
    out = tmp_path / "out.jsonl"
    assert ok_json(vipune(env, "--db-path", str(db), "--json", "export", str(out)))["rows"] == 1
    first, second = out.read_text().splitlines()
    hdr, exported = json.loads(first), json.loads(second)
    # Compact, keys sorted, no legacy "version" in the header (its importer takes either key).
    assert first == json.dumps(hdr, sort_keys=True, separators=(",", ":"))
    assert list(exported) == sorted(exported) and "version" not in hdr
    assert (
        hdr["type"],
        hdr["format_version"],
        hdr["embedding_dims"],
        hdr["model_id"],
        hdr["model_revision"],
        hdr["rows"],
    ) == ("export", 1, DIM, EMBED_MODEL_ID, EMBED_MODEL_REVISION, 1)
    assert (exported["id"], exported["project_id"], exported["content"]) == (added["id"], "probe", text)
    vec = np.frombuffer(base64.b64decode(exported["embedding"]), "<f4")
    np.testing.assert_allclose(vec, reference_embed(vipune_tiny_model_dir, text), atol=1e-6)
    # The export is valid import input.
    proc = vipune(env, "--db-path", str(tmp_path / "copy.db"), "--json", "import", str(out))
    assert ok_json(proc) == {"inserted": 1, "skipped": 0}
    # "-" is not stdout: a file of that name in the working folder.
    proc = vipune(env, "--db-path", str(db), "--json", "export", "-")
    assert ok_json(proc) == {"rows": 1, "format_version": 1, "path": "-"}
    assert json.loads((Path(env["HOME"]) / "-").read_text().splitlines()[1])["embedding"] == exported["embedding"]


def test_add_without_force_reports_conflicts(env, db) -> None:
    args = ["--db-path", str(db), "--json", "add", QUERY]
    assert ok_json(vipune(env, *args))["status"] == "added"
    proc = vipune(env, *args)
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["status"] == "conflicts"


# --------------------------------------------------------------------------- faults
@fake_only
def test_fault_modes(env, db, tmp_path, qvec) -> None:
    import_rows(env, db, tmp_path, [row("a", qvec)])
    base = ["--db-path", str(db), "-p", "p1", "--json", "search", "--no-touch", "--", QUERY]

    assert vipune(env, *base, FAKE_VIPUNE_FAULT="crash").returncode == -9
    proc = vipune(env, *base, FAKE_VIPUNE_FAULT="garbage")
    with pytest.raises(json.JSONDecodeError):
        json.loads(proc.stdout)
    proc = vipune(env, *base, FAKE_VIPUNE_FAULT="empty")
    assert (proc.returncode, proc.stdout) == (0, "")
    proc = vipune(env, *base, FAKE_VIPUNE_FAULT="error")
    assert (proc.returncode, json.loads(proc.stdout)) == (1, {"error": "injected"})
    with pytest.raises(subprocess.TimeoutExpired):
        vipune(env, *base, FAKE_VIPUNE_FAULT="hang", timeout=1.0)

    src = write_jsonl(tmp_path / "more.jsonl", [row("b", qvec), row("c", qvec)])
    proc = vipune(env, "--db-path", str(db), "--json", "import", str(src), FAKE_VIPUNE_FAULT="short-import")
    assert ok_json(proc) == {"inserted": 1, "skipped": 0}
    assert db_count(db) == 3


# --------------------------------------------------------------------------- the query cache
@fake_only
def test_a_cached_query_vector_is_the_computed_one_and_is_kept_per_model_and_pooling(env, db, tmp_path, qvec) -> None:
    import_rows(
        env, db, tmp_path, [row("r30", at_cosine(qvec, 0.3, 1)), row("r90", at_cosine(qvec, 0.9, 2)), row("r100", qvec)]
    )
    cache = tmp_path / "query-vectors"

    def ranked(hf_home: Path | None = None, **extra_env: str) -> list[tuple[str, float]]:
        call_env = {**env, "HF_HOME": str(hf_home)} if hf_home else env
        return [
            (h["id"], h["similarity"])
            for h in search(
                call_env,
                db,
                QUERY,
                "--no-hybrid",
                "--recency",
                "0",
                **{"FAKE_VIPUNE_QUERY_CACHE": str(cache), **extra_env},
            )
        ]

    computed = ranked(FAKE_VIPUNE_QUERY_CACHE="")
    assert not cache.exists()  # an empty FAKE_VIPUNE_QUERY_CACHE keeps nothing
    assert ranked() == computed  # computed, then kept
    (kept,) = cache.iterdir()
    np.testing.assert_allclose(np.frombuffer(kept.read_bytes(), "<f4"), qvec, atol=1e-6)
    assert ranked() == computed  # read back: the same scores to the last bit
    kept.write_bytes(at_cosine(qvec, 0.9, 2).tobytes())  # the cache is what a second search reads
    assert ranked()[0] == ("r90", pytest.approx(1.0))
    # Another model or another pooling is another vector: the altered one is not read.
    other = build_vipune_hf_home(
        build_tiny_model(tmp_path / "other-model", seed=5),
        "model.onnx",
        EMBED_MODEL_ID,
        EMBED_MODEL_REVISION,
        tmp_path / "other-hf",
    )
    assert ranked(other) == ranked(other, FAKE_VIPUNE_QUERY_CACHE="") != ranked()
    assert (
        ranked(FAKE_VIPUNE_FAULT="cls-pooling")
        == ranked(FAKE_VIPUNE_FAULT="cls-pooling", FAKE_VIPUNE_QUERY_CACHE="")
        != ranked()
    )
    assert len(list(cache.iterdir())) == 3
