"""Kept stores on real builds (issue 54 item 1): a vipune checkout edited one file at a time, each
kind of file once, built ``--fast`` (binary and lane) by .ci/vipune/build.sh. After an edit of a
file that runs only at search time the lib lane reuses every persona's kept store (copies it,
seeds nothing); after an edit of what seeds (the FTS5 schema, the insert, Cargo.lock) it seeds
anew. After every edit vipune-lib ranks as that checkout's binary on every top-10 list, semantic
and hybrid, and the search edits move the binary's fused scores (the comparison is not empty).

The tree is a copy of the pinned release's sources set up and first built by ``.ci/run``
(VIPUNE_EVAL_STORES_FIXTURE); each edit is undone after its build. The tests of this file run in
order, on one worker (pytest's --dist loadfile).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from support import real_vipune
from support.search import write_shard
from support.synthetic import VOCABULARY
from vipune_eval.core.persona import Persona
from vipune_eval.core.tokens import count_tokens
from vipune_eval.core.trec import read_run
from vipune_eval.stages.search.kept_stores import Keeping
from vipune_eval.stages.search.vipune_lib import run_vipune_lib
from vipune_eval.vipune.contract import EMBED_MODEL_ID, EMBED_MODEL_REVISION
from vipune_eval.vipune.home import build_vipune_hf_home
from vipune_eval.vipune.settings import VipuneSettings
from vipune_eval.vipune.vipune_lane import find_lane, lane_fingerprint

pytestmark = [pytest.mark.real_vipune, pytest.mark.slow]

FIXTURE = "VIPUNE_EVAL_STORES_FIXTURE"
UUID_1_29 = (
    'name = "uuid"\nversion = "1.29.0"\nsource = "registry+https://github.com/rust-lang/crates.io-index"\n'
    'checksum = "4a0e2d11620c50695fe12bbbfde96b3477fe606e7284c22d505c12ce51214514"\n'
)
UUID_1_26 = (
    'name = "uuid"\nversion = "1.26.1"\nsource = "registry+https://github.com/rust-lang/crates.io-index"\n'
    'checksum = "2ef6dac1e96601b4fb3acccccff2139741fcb757cb9a36089bf5be91cfb285ce"\n'
)  # vipune 0.19.1's

# kind of file → (file, the text, its replacement, whether the stores must be seeded anew)
EDITS = {
    "search only: the fusion (src/rrf.rs)": ("src/rrf.rs", "Self { k: 25.0 }", "Self { k: 60.0 }", False),
    "search only: the BM25 query (src/sqlite/fts.rs)": ("src/sqlite/fts.rs", '.join(" ")', '.join(" OR ")', False),
    "seeding: the FTS5 schema (src/sqlite/mod.rs)": (
        "src/sqlite/mod.rs",
        "tokenize='porter unicode61'",
        "tokenize='unicode61'",
        True,
    ),
    "seeding: the insert (src/sqlite/import.rs)": ("src/sqlite/import.rs", "Ok(rows > 0)", "Ok(rows >= 1)", True),
    "seeding: Cargo.lock (uuid 1.29.0 → 1.26.1)": ("Cargo.lock", UUID_1_29, UUID_1_26, True),
}


@pytest.fixture(scope="module")
def checkout() -> Path:
    return real_vipune.fixture_tree(FIXTURE)


def build(checkout: Path) -> tuple[Path, Path]:
    proc = subprocess.run(
        ["bash", str(real_vipune.BUILD), "--checkout", str(checkout), "--fast"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    binary = Path(proc.stdout.strip().splitlines()[-1])
    return binary, find_lane(binary, "checkout")


def personas(model_dir: Path, count: int = 5) -> list[Persona]:
    """Haystacks of the tiny model's words, so BM25 matches rows and the fusion decides; the
    questions are two words, often in a row only with other forms (the stemmer matters)."""
    words = np.array(VOCABULARY[:40])
    out = []
    for seed in range(count):
        rng = np.random.default_rng(100 + seed)
        rows = [20, 60, 150, 40, 90][seed % 5]
        vectors = rng.normal(size=(rows, 384)).astype(np.float32)
        question = " ".join(rng.choice(words, 2))
        qid = f"e{seed}"
        out.append(
            Persona(
                question_id=qid,
                question=question,
                row_ids=[f"{qid}::s{i}" for i in range(rows)],
                session_ids=[f"s{i}" for i in range(rows)],
                created_at=["2023-01-01T00:00:00Z"] * rows,
                texts=[
                    "user: " + " ".join(rng.choice(words, rng.integers(2, 9))) + "s" * int(rng.integers(0, 2))
                    for _ in range(rows)
                ],
                vectors=vectors,
                query_vector=np.zeros(384, np.float32),
                query_tokens=int(count_tokens(model_dir, [question])[0]),
            )
        )
    return out


@pytest.fixture(scope="module")
def lists(checkout, vipune_tiny_model_dir, tmp_path_factory):
    """``run(tag)``: the checkout as it is now built, its binary's top-10 lists and its lib lane's
    (one job over a shard of the personas, the stores kept in one folder for every build), and
    whether that job reused every store or seeded every one."""
    root = tmp_path_factory.mktemp("kept")
    stores = root / "stores"
    vipune_hf_home = build_vipune_hf_home(
        vipune_tiny_model_dir, "model.onnx", EMBED_MODEL_ID, EMBED_MODEL_REVISION, root / "hf_home"
    )
    made = personas(vipune_tiny_model_dir)

    def run(tag: str) -> dict:
        binary, lane = build(checkout)
        by_binary, queries = {}, {}
        for persona in made:
            query, rankings = real_vipune.binary_rankings(
                binary, persona, vipune_hf_home, root / tag / persona.question_id
            )
            queries[persona.question_id], by_binary[persona.question_id] = query, rankings
        shard = write_shard(
            root / tag / "view", [dataclasses.replace(p, query_vector=queries[p.question_id]) for p in made]
        )
        built = {"id": "x", "version": "checkout", "sha256": hashlib.sha256(binary.read_bytes()).hexdigest()}
        fingerprint = root / tag / "lane.json"
        fingerprint.write_text(json.dumps(lane_fingerprint(lane, built, 60)))
        runs = {name: root / tag / f"{name}.run" for name in ("hybrid", "semantic")}
        run_vipune_lib(
            shard,
            VipuneSettings("", Path(), None, root / tag / "tmp", 60),
            lane,
            fingerprint,
            on_error="stop",
            out=runs["hybrid"],
            semantic_out=runs["semantic"],
            status_out=root / tag / "status.json",
            arms_out=root / tag / "arms.parquet",
            keeping=Keeping(stores, 10),
        )
        steps = set(json.loads((root / tag / "status.json").read_text())["lane_seconds"])
        return {
            "binary": {
                qid: {name: [rid.split("::")[1] for rid, _ in hits][:10] for name, hits in r.items()}
                for qid, r in by_binary.items()
            },
            "fused": {qid: [score for _, score in r["hybrid"]] for qid, r in by_binary.items()},
            "lib": {
                name: {qid: [hit[0] for hit in hits] for qid, hits in read_run([path]).items()}
                for name, path in runs.items()
            },
            "reused": "copy" in steps and "insert" not in steps,
            "seeded": "insert" in steps and "copy" not in steps,
        }

    return run


@pytest.fixture(scope="module")
def release(lists):
    """The checkout as the release ships it: every store seeded and kept."""
    found = lists("release")
    assert found["seeded"]
    return found


def same_lists(found: dict) -> None:
    for qid, by_binary in found["binary"].items():
        for name in ("semantic", "hybrid"):
            assert found["lib"][name][qid] == by_binary[name], (qid, name)


@pytest.mark.parametrize("kind", list(EDITS))
def test_each_kind_of_edit_reuses_or_seeds_anew_and_the_lib_lane_ranks_as_the_binary(checkout, lists, release, kind):
    file, old, new, reseeds = EDITS[kind]
    same_lists(release)
    path = checkout / file
    original = path.read_text()
    assert original.count(old) == 1, f"{path}: the text the edit replaces ({old!r}) is not there once"
    try:
        path.write_text(original.replace(old, new))
        found = lists(kind.split(":")[0] + "-" + Path(file).stem)
    finally:
        path.write_text(original)
    assert found["seeded"] if reseeds else found["reused"], (kind, found["reused"], found["seeded"])
    same_lists(found)
    if (
        not reseeds
    ):  # the search edit ran on the kept stores: the binary's fused scores moved, and vipune-lib's with them
        assert found["fused"] != release["fused"]
