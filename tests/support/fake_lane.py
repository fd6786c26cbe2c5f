#!/usr/bin/env python3
"""A contract-faithful fake of ``vipune-lane`` (lane/, the Rust lane), for the project's fast tests.

It speaks the vipune-lane's protocol (lane/src/main.rs, docs/vipune-contract.md) and searches each
persona with tests/support/fake_vipune.py's own database, semantic search, BM25 and fusion (the fake
vipune is itself checked against the real binary), so a run on the fake lane ranks exactly as one
on the fake binary. tests/unit/vipune/test_vipune_lane.py runs its tests on the real lane too.

``version`` names as ``binary_sha256`` the sha256 of the ``vipune`` beside it (the binary it
"was built with": in ``FAKE_LANE_DIR``, which its wrapper script sets to its own folder), or
``FAKE_LANE_BINARY_SHA256``; and, with ``FAKE_LANE_SOURCE_SHA256``, that as the sha256 of the
vipune source it "compiled" (the real lane's ``sources.vipune_source_sha256``). Faults, env ``FAKE_LANE_FAULT``: ``refuse``
(an error answer for a question containing ``FAKE_LANE_FAULT_MATCH``), ``crash`` (exit 1 with
a message before answering such a question), ``hang`` (sleep instead of answering it),
``hang-at-start`` (sleep before reading anything, as a lane stuck at start: each start of it writes a
line to ``FAKE_LANE_STARTS``, where set),
``foreign-id`` (its hybrid ranking holds an id of no row), ``garbage`` (a non-JSON line instead).
``FAKE_VIPUNE_FAULT`` changes the search as it does the fake binary's (``rrf-k60``, ``bm25-or``).
With ``--arms`` it answers the lists its fusion was given (``fusions``), as the real lane does.
Kept stores as the real lane keeps them (a header's ``keep``: the database as seeded, copied
there; ``seeded``: a kept store copied instead of seeding); ``version``'s ``sources.seeding``
names what seeds its databases: this file's and the fake vipune's bytes, and ``FAKE_LANE_SEEDING``
(a wrapper's preamble sets it to stand for an edit of vipune's insert path).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fake_vipune as vipune  # noqa: E402

MAX_CANDIDATE_POOL = 10_000


def version() -> dict:
    binary = Path(os.environ.get("FAKE_LANE_DIR", Path(sys.argv[0]).parent)) / "vipune"
    sha = os.environ.get("FAKE_LANE_BINARY_SHA256") or (
        hashlib.sha256(binary.read_bytes()).hexdigest() if binary.is_file() else None
    )
    return {
        "name": "vipune-lane",
        "lane": "0.1.0",
        "vipune": vipune.DEFAULT_VERSION,
        "vipune_source": "the fake lane of the tests (tests/support/fake_lane.py)",
        "lane_source": None,
        "binary_sha256": sha,
        "profile": None,
        "calls": ["fake_vipune.semantic_search", "fake_vipune.bm25_search", "fake_vipune.rrf_fusion"],
        "sources": {
            "compiled": [],
            "copies": [],
            "vipune_source_sha256": os.environ.get("FAKE_LANE_SOURCE_SHA256"),
            "seeding": {"sha256": seeding_sha256(), "search_only": [], "changed": []},
        },
        "unrecorded_arms": None,
    }


def seeding_sha256() -> str:
    """What seeds the fake's databases: its own code, the fake vipune's, and FAKE_LANE_SEEDING."""
    digest = hashlib.sha256(os.environ.get("FAKE_LANE_SEEDING", "").encode())
    for code in (Path(__file__), Path(vipune.__file__)):
        digest.update(code.read_bytes())
    return digest.hexdigest()


def seed(header: dict, matrix, db_path: str) -> str | None:
    """The persona's database at ``db_path``: a kept store copied (``seeded``), or its rows
    inserted, the database closed and copied to ``keep`` (what went wrong there, if anything)."""
    if header.get("seeded"):
        shutil.copyfile(header["seeded"], db_path)
        return None
    conn = vipune.open_db(db_path)
    try:
        conn.execute("BEGIN")
        for i, rid in enumerate(header["ids"]):
            created = header["created_at"][i]
            conn.execute(
                "INSERT INTO memories (id, project_id, content, embedding, created_at, updated_at) "
                "VALUES (?,?,?,?,?,?)",
                (rid, header["question_id"], header["contents"][i], matrix[i].tobytes(), created, created),
            )
        conn.execute("COMMIT")
    finally:
        conn.close()
    if header.get("keep"):
        try:
            shutil.copyfile(db_path, header["keep"])
        except OSError as exc:
            Path(header["keep"]).unlink(missing_ok=True)
            return f"copying the seeded database to {header['keep']}: {exc}"
    return None


def answer(header: dict, vectors: bytes, db_path: str, arms: bool = False) -> dict:
    import numpy as np

    qid, n, dims = header["question_id"], len(header["ids"]), header["dims"]
    matrix = np.frombuffer(vectors, dtype="<f4").reshape(n + 1, dims)
    query = header["question"].strip()
    # the binary's search options, read as the fake binary reads them (its own parser)
    flags = vipune.build_parser().parse_args(["search", *header["flags"], "--", header["question"]])
    limit = flags.limit
    weight = flags.recency if flags.recency is not None else vipune.DEFAULT_RECENCY_WEIGHT
    try:  # what the fake binary's search refuses, in its order, with its message and exit code
        if not 0.0 <= weight <= 1.0:
            raise vipune.VipuneError(f"Invalid recency weight: {weight} (must be between 0.0 and 1.0)")
        vipune.validate_query(query)
        vipune.validate_limit(limit)
        if query and header["question_tokens"] > vipune.MAX_EMBEDDING_TOKENS:
            raise vipune.VipuneError(
                f"content exceeds {vipune.MAX_EMBEDDING_TOKENS}-token embedding limit "
                f"(measured: {header['question_tokens']} tokens)",
                vipune.EXIT_TOO_LONG,
            )
    except vipune.VipuneError as exc:
        return {"question_id": qid, "error": str(exc), "exit_code": exc.code}
    try:
        keep_error = seed(header, matrix, db_path)
        conn = vipune.open_db(db_path)
    except vipune.VipuneError as exc:  # as the vipune-lane answers a database it cannot open (a full disk)
        return {"question_id": qid, "error": f"Database::open: {exc}", "exit_code": vipune.EXIT_ERROR}
    except (sqlite3.Error, OSError) as exc:
        return {"question_id": qid, "error": str(exc), "exit_code": vipune.EXIT_ERROR}
    try:
        start = time.perf_counter()
        semantic = vipune.semantic_search(conn, qid, matrix[n], limit)
        pool = min(max(limit * 10, 50), MAX_CANDIDATE_POOL)
        fusion = [vipune.semantic_search(conn, qid, matrix[n], pool), vipune.bm25_search(conn, query, qid, pool)]
        fused = vipune.rrf_fusion(fusion)  # on copies of the rows: the lists keep their own scores
        if weight > 0.0:
            semantic, fused = vipune.apply_recency(semantic, weight), vipune.apply_recency(fused, weight)
        fused = fused[:limit]
        seconds = time.perf_counter() - start
    except (vipune.VipuneError, sqlite3.Error) as exc:
        return {"question_id": qid, "error": str(exc), "exit_code": vipune.EXIT_ERROR}
    finally:
        conn.close()
    hybrid = [[r["id"], r["similarity"]] for r in fused]
    if _faulted("foreign-id", query) and hybrid:
        hybrid[0][0] = "no-such-row"
    out = {
        "question_id": qid,
        "semantic": [[r["id"], r["similarity"]] for r in semantic],
        "hybrid": hybrid,
        "seconds": {
            **({"copy": 0.0} if header.get("seeded") else {"open": 0.0, "insert": 0.0}),
            **({"keep": 0.0} if header.get("keep") else {}),
            "semantic": seconds / 2,
            "hybrid": seconds / 2,
        },
    }
    if keep_error:
        out["keep_error"] = keep_error
    if arms:
        out["fusions"] = [{"k": vipune.rrf_k(), "lists": [[[r["id"], r["similarity"]] for r in arm] for arm in fusion]}]
    return out


def _faulted(fault: str, question: str) -> bool:
    return os.environ.get("FAKE_LANE_FAULT") == fault and os.environ.get("FAKE_LANE_FAULT_MATCH", "") in question


def search(args: list[str]) -> int:
    arms = "--arms" in args
    args = [a for a in args if a != "--arms"]
    if args[:1] == ["--tmp"] and len(args) == 2:
        folder = args[1]
    else:
        print("vipune-lane: search needs --tmp DIR [--arms]", file=sys.stderr)
        return 2
    if os.environ.get("FAKE_LANE_STARTS"):
        with open(os.environ["FAKE_LANE_STARTS"], "a") as starts:
            starts.write("search\n")
    if os.environ.get("FAKE_LANE_FAULT") == "hang-at-start":
        time.sleep(3600)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    for number, line in enumerate(iter(stdin.readline, b""), start=1):
        header = json.loads(line)
        if header.get("seeded") and (header["ids"] or header.get("keep")):
            print(
                f'vipune-lane: persona {header["question_id"]}: a kept store ("seeded") comes without rows '
                'and without "keep"',
                file=sys.stderr,
            )
            return 2
        size = (len(header["ids"]) + 1) * header["dims"] * 4
        vectors = stdin.read(size)
        if len(vectors) != size:
            print(f"vipune-lane: persona {header['question_id']}: its vectors end early", file=sys.stderr)
            return 2
        question = header["question"]
        if _faulted("crash", question):
            print(f"vipune-lane: injected crash at persona {header['question_id']}", file=sys.stderr)
            return 1
        if _faulted("hang", question):
            time.sleep(3600)
        if _faulted("garbage", question):
            stdout.write(b"not json\n")
            stdout.flush()
            continue
        if _faulted("refuse", question):
            result = {"question_id": header["question_id"], "error": "injected refusal", "exit_code": 1}
        else:
            with tempfile.TemporaryDirectory(dir=folder) as tmp:
                result = answer(header, vectors, str(Path(tmp) / f"persona-{number}.db"), arms)
        stdout.write(json.dumps(result).encode() + b"\n")
        stdout.flush()
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["version"]:
        print(json.dumps(version()))
        return 0
    if argv[:1] == ["search"]:
        return search(argv[1:])
    print("usage: vipune-lane version | vipune-lane search --tmp DIR [--arms]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
