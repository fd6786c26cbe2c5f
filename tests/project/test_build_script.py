""".ci/vipune/build.sh on a vipune source tree. A checkout whose Cargo.lock pins a crate the
registry lacks builds where the release builds, from a copy, and says what it moved (issue 38); a
fast build (``--fast``) ranks exactly as the release profile, and the lib lane of a checkout whose
fusion differs (RRF k = 60) ranks exactly as that checkout's binary (issue 43). Two clones both
named ``vipune`` are two builds, one after the other and side by side; a path built before never
lends its compiled code to other bytes, whatever their dates; a lane that does not build leaves
the previous binary and lane in place and names the file it lacks; builds of one checkout wait
for each other (issue 51 item 2).
``vipune-eval explain`` on a pair the k = 60 checkout moved shows arm ranks whose fusion gives both
builds' lists (issue 52).

The trees are vipune's own release sources as crates.io ships them (their Cargo.lock pins
webpki-roots 1.0.11, which this registry lacks), and two copies of them named ``vipune`` with
``RrfConfig::default().k`` = 60 and 2, every file dated 2006 as crates.io's, set up and first
built by ``.ci/run`` (VIPUNE_EVAL_CHECKOUT_FIXTURE, VIPUNE_EVAL_K60_FIXTURE, VIPUNE_EVAL_K2_FIXTURE);
here build.sh runs on them again, which rebuilds nothing that did not change (the k = 2 clone is
edited and built again three times, a few tens of seconds each, and left as it was). Skipped,
saying why, where CI has not set them up. The tests of this file run in order, on one worker
(pytest's --dist loadfile).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from support import real_vipune
from support.search import write_shard
from support.synthetic import VOCABULARY
from vipune_eval.core.persona import Persona
from vipune_eval.core.ranking_settings import RankingSettings
from vipune_eval.core.tokens import count_tokens
from vipune_eval.stages.filter.pairs import PAIRS_SCHEMA
from vipune_eval.stages.report import explain
from vipune_eval.stages.score import Scoring, run_score
from vipune_eval.stages.search.vipune_lib import run_vipune_lib
from vipune_eval.vipune.binary import lock_deviations
from vipune_eval.vipune.settings import VipuneSettings
from vipune_eval.vipune.vipune_lane import VipuneLane, find_lane, lane_fingerprint

pytestmark = pytest.mark.real_vipune

BUILD = real_vipune.BUILD
FIXTURE = "VIPUNE_EVAL_CHECKOUT_FIXTURE"
K60_FIXTURE = "VIPUNE_EVAL_K60_FIXTURE"
K2_FIXTURE = "VIPUNE_EVAL_K2_FIXTURE"
CRATES_IO_TIME = 1153704088  # 2006-07-24, the time of every file crates.io ships
FLAGS = VipuneSettings("", Path(), None, Path(), 60).query_flags(10)  # the binary's options, limit 10


@pytest.fixture(scope="module")
def checkout() -> Path:
    return real_vipune.fixture_tree(FIXTURE)


@pytest.fixture(scope="module")
def k60_checkout() -> Path:
    return real_vipune.fixture_tree(K60_FIXTURE)


@pytest.fixture(scope="module")
def k2_checkout() -> Path:
    return real_vipune.fixture_tree(K2_FIXTURE)


def build_checkout(folder: Path, *flags: str) -> tuple[Path, Path]:
    """(binary, lane) of ``build.sh --checkout folder [flags]`` (built by .ci/run: seconds here)."""
    proc = subprocess.run(
        ["bash", str(BUILD), "--checkout", str(folder), *flags], capture_output=True, text=True, timeout=1800
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    binary = Path(proc.stdout.strip().splitlines()[-1])
    return binary, find_lane(binary, "checkout")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_dated(path: Path, text: str) -> None:
    """``text`` at ``path``, dated as crates.io dates its files (older than any build here)."""
    path.write_text(text)
    os.utime(path, (CRATES_IO_TIME, CRATES_IO_TIME))


def fused_k(binary: Path, model_dir: Path, hf_home: Path, tmp: Path) -> float:
    """The RRF k a binary's hybrid search fuses with, read off its scores: with a question one of
    whose words no row holds, vipune's BM25 (an AND of every word) finds nothing, and the row
    ranked r by the vector arm scores 1 / (k + r)."""
    persona = dataclasses.replace(personas(model_dir, 1)[0], question="unmatched " + personas(model_dir, 1)[0].question)
    _, rankings = real_vipune.binary_rankings(binary, persona, hf_home, tmp)
    assert [rid for rid, _ in rankings["hybrid"]] == [rid for rid, _ in rankings["semantic"]]
    return round(1 / rankings["hybrid"][0][1] - 1, 6)


def checked_pair(binary: Path, lane: Path, tree: Path) -> dict:
    """What the vipune-lane says, having checked that it names its binary and compiled the tree's rrf.rs
    and the very source the binary's build.json records."""
    said = lane_said(lane)
    record = json.loads((binary.resolve().parent.parent / "build.json").read_text())
    assert said["binary_sha256"] == sha(binary) == record["binary_sha256"]
    assert said["sources"]["vipune_source_sha256"] == record["vipune_source_sha256"]
    compiled = {c["file"]: c["sha256"] for c in said["sources"]["compiled"]}
    assert compiled["src/rrf.rs"] == sha(tree / "src" / "rrf.rs")
    return said


def release_build() -> tuple[Path, Path]:
    binary, why = real_vipune.find()
    if binary is None:
        pytest.fail(why) if real_vipune.required() else pytest.skip(why)
    return binary, find_lane(binary, real_vipune.RELEASE)


def lane_said(lane: Path) -> dict:
    return json.loads(subprocess.run([str(lane), "version"], capture_output=True, text=True, check=True).stdout)


def personas(model_dir: Path, count: int = 6) -> list[Persona]:
    """Haystacks of the tiny model's words (so BM25 matches some rows, and the fusion decides),
    with exact cosine ties (so the tie-breaks decide too)."""
    words = np.array(VOCABULARY[:40])
    out = []
    for seed in range(count):
        rng = np.random.default_rng(seed)
        rows = [12, 60, 150, 7, 90, 300][seed % 6]
        vectors = rng.normal(size=(rows, 384)).astype(np.float32)
        vectors[1::9] = vectors[0]
        question = " ".join(rng.choice(words, 2))
        qid = f"k{seed}"
        out.append(
            Persona(
                question_id=qid,
                question=question,
                row_ids=[f"{qid}::s{i}" for i in range(rows)],
                session_ids=[f"s{i}" for i in range(rows)],
                created_at=[f"2023-01-0{d}T00:00:00Z" for d in rng.integers(1, 4, rows)],
                texts=["user: " + " ".join(rng.choice(words, rng.integers(2, 9))) for _ in range(rows)],
                vectors=vectors,
                query_vector=np.zeros(384, np.float32),
                query_tokens=int(count_tokens(model_dir, [question])[0]),
            )
        )
    return out


def lane_rankings(lane: Path, persona: Persona, query: np.ndarray, tmp: Path) -> dict[str, list]:
    fed = dataclasses.replace(persona, query_vector=query)
    [(_, answer)] = VipuneLane(lane, tmp, timeout=60).search([fed], FLAGS)
    return {name: [tuple(hit) for hit in answer[name]] for name in ("semantic", "hybrid")}


def tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_a_checkout_whose_lock_the_registry_cannot_honour_builds_from_a_copy(checkout):
    before = tree(checkout)
    assert 'name = "webpki-roots"\nversion = "1.0.11"' in (checkout / "Cargo.lock").read_text()
    proc = subprocess.run(
        ["bash", str(BUILD), "--checkout", str(checkout)], capture_output=True, text=True, timeout=1800
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    binary = Path(proc.stdout.strip().splitlines()[-1])
    assert tree(checkout) == before and not (checkout / "target").exists()  # the tree was never written to
    assert "webpki-roots 1.0.11 → " in ", ".join(lock_deviations(binary))
    said = subprocess.run(
        [str(find_lane(binary, "checkout")), "version"], capture_output=True, text=True, check=True
    ).stdout
    lane = json.loads(said)
    assert lane["binary_sha256"] == hashlib.sha256(binary.read_bytes()).hexdigest()
    assert lane["vipune_source"].startswith(f"checkout {checkout}")
    assert lane["vipune_source"].endswith(  # the binary's words for the move (plan.builds)
        f", built with its Cargo.lock moved where the registry lacks a pin ({', '.join(lock_deviations(binary))})"
    )


def test_a_fast_build_ranks_exactly_as_the_release_profile(checkout, vipune_hf_home, vipune_tiny_model_dir, tmp_path):
    """The release's own sources built --fast: other bytes, the same lists and scores, binary and
    lane, on every persona; its vipune-lane says it is a fast build (the report names it so)."""
    release, release_lane = release_build()
    fast, fast_lane = build_checkout(checkout, "--fast")
    assert lane_said(fast_lane)["profile"] == "fast" and lane_said(release_lane)["profile"] == "release"
    assert hashlib.sha256(fast.read_bytes()).digest() != hashlib.sha256(release.read_bytes()).digest()
    for i, persona in enumerate(personas(vipune_tiny_model_dir)):
        query, by_release = real_vipune.binary_rankings(release, persona, vipune_hf_home, tmp_path / f"r{i}")
        fast_query, by_fast = real_vipune.binary_rankings(fast, persona, vipune_hf_home, tmp_path / f"f{i}")
        assert fast_query.tobytes() == query.tobytes()
        assert by_fast == by_release, persona.question_id
        assert lane_rankings(fast_lane, persona, query, tmp_path / "dbs") == by_release, persona.question_id
        assert lane_rankings(release_lane, persona, query, tmp_path / "dbs") == by_release, persona.question_id


def test_the_lib_lane_follows_an_edit_of_vipunes_fusion(k60_checkout, vipune_hf_home, vipune_tiny_model_dir, tmp_path):
    """A checkout whose RRF k is 60 (src/rrf.rs): its vipune-lane's fused scores equal its binary's on
    every list and score, and differ from the release's k = 25 (the vipune-lane compiles rrf.rs from the
    source it is built against; a copy would have kept 25)."""
    assert "Self { k: 60.0 }" in (k60_checkout / "src" / "rrf.rs").read_text()
    binary, lane = build_checkout(k60_checkout, "--fast")
    _, release_lane = release_build()
    compiled = {c["file"]: c["sha256"] for c in lane_said(lane)["sources"]["compiled"]}
    released = {c["file"]: c["sha256"] for c in lane_said(release_lane)["sources"]["compiled"]}
    assert (
        compiled["src/rrf.rs"] != released["src/rrf.rs"]
        and compiled["src/memory/search.rs"] == released["src/memory/search.rs"]
    )
    assert all(copy["same"] for copy in lane_said(lane)["sources"]["copies"])  # rrf.rs is compiled, not copied
    fused_differ = 0
    for i, persona in enumerate(personas(vipune_tiny_model_dir)):
        query, by_binary = real_vipune.binary_rankings(binary, persona, vipune_hf_home, tmp_path / f"b{i}")
        assert lane_rankings(lane, persona, query, tmp_path / "dbs") == by_binary, persona.question_id
        by_release = lane_rankings(release_lane, persona, query, tmp_path / "dbs")
        assert by_release["semantic"] == by_binary["semantic"]
        fused_differ += [s for _, s in by_release["hybrid"]] != [s for _, s in by_binary["hybrid"]]
    assert fused_differ == len(personas(vipune_tiny_model_dir))


def test_a_lane_built_alone_ranks_as_the_binary_of_the_same_source(
    k60_checkout, vipune_hf_home, vipune_tiny_model_dir, tmp_path
):
    """build.sh --lane-only (issue 54 item 2): the vipune-lane alone, printed; it names no binary, and the
    source it compiled is the one its build.json records; it ranks as the binary of a full build of
    the same source on every list and score (the k = 60 checkout: the fusion compiled from it)."""
    binary = build_checkout(k60_checkout, "--fast")[0].resolve()  # its build's own folder: bin/ moves on
    proc = subprocess.run(
        ["bash", str(BUILD), "--checkout", str(k60_checkout), "--fast", "--lane-only"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lane = Path(proc.stdout.strip().splitlines()[-1])
    assert lane.name == find_lane(lane, "checkout").name and lane.name.startswith("vipune-lane-")
    assert not (lane.parent / "vipune").exists()  # no binary was built
    said, record = lane_said(lane), json.loads((lane.resolve().parent.parent / "build.json").read_text())
    assert said["binary_sha256"] is None and record["binary_sha256"] is None
    assert said["sources"]["vipune_source_sha256"] == record["vipune_source_sha256"] and said["profile"] == "fast"
    for i, persona in enumerate(personas(vipune_tiny_model_dir)):
        query, by_binary = real_vipune.binary_rankings(binary, persona, vipune_hf_home, tmp_path / f"b{i}")
        assert lane_rankings(lane, persona, query, tmp_path / "dbs") == by_binary, persona.question_id
    build_checkout(k60_checkout, "--fast")  # the pair again, for the tests after this one


# ------------------------------------------------ issue 51 item 2: a build is keyed by its full path and its bytes


def test_two_clones_named_vipune_get_a_build_each_one_after_the_other_and_side_by_side(
    k60_checkout, k2_checkout, vipune_hf_home, vipune_tiny_model_dir, tmp_path
):
    """Both folders are named `vipune` (every clone of vipune's repository is) and every file is
    dated 2006: keyed by the folder's name, the second build reused the first's compiled code."""
    assert k60_checkout.name == k2_checkout.name == "vipune"
    for run in range(2):
        if run == 0:  # one after the other, the first again last
            built = {tree: build_checkout(tree, "--fast") for tree in (k60_checkout, k2_checkout)}
            assert build_checkout(k60_checkout, "--fast") == built[k60_checkout]
        else:  # side by side
            procs = {
                tree: subprocess.Popen(
                    ["bash", str(BUILD), "--checkout", str(tree), "--fast"],
                    text=True,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
                for tree in (k60_checkout, k2_checkout)
            }
            for tree, proc in procs.items():
                out, err = proc.communicate(timeout=1800)
                assert proc.returncode == 0, err[-3000:]
                binary = Path(out.strip().splitlines()[-1])
                assert binary == built[tree][0]
        homes = {binary.parent.parent for binary, _ in built.values()}
        assert len(homes) == 2 and all(home.name.startswith("checkout-vipune-") for home in homes)
        for tree, (binary, lane) in built.items():
            checked_pair(binary, lane, tree)
            k = fused_k(binary, vipune_tiny_model_dir, vipune_hf_home, tmp_path / f"{run}-{tree.parent.name}")
            assert k == (60 if tree == k60_checkout else 2), tree
        for i, persona in enumerate(personas(vipune_tiny_model_dir, 2)):
            for tree, (binary, lane) in built.items():
                query, by_binary = real_vipune.binary_rankings(
                    binary, persona, vipune_hf_home, tmp_path / f"r{run}-{i}-{tree.parent.name}"
                )
                assert lane_rankings(lane, persona, query, tmp_path / "dbs") == by_binary, (tree, persona.question_id)


def test_a_path_built_before_never_lends_its_code_to_other_bytes_dated_older(
    k2_checkout, vipune_hf_home, vipune_tiny_model_dir, tmp_path
):
    """The pristine release's rrf.rs written into the k = 2 clone, dated 2006 as crates.io's: the
    build ranks with k = 25, binary and lane (trusting the date, cargo kept the k = 2 code: vipune-lib
    and its binary apart on 10 of 19 lists)."""
    rrf = k2_checkout / "src" / "rrf.rs"
    edited = rrf.read_text()
    assert "Self { k: 2.0 }" in edited
    try:
        write_dated(rrf, edited.replace("Self { k: 2.0 }", "Self { k: 25.0 }"))
        binary, lane = build_checkout(k2_checkout, "--fast")
        checked_pair(binary, lane, k2_checkout)
        assert fused_k(binary, vipune_tiny_model_dir, vipune_hf_home, tmp_path / "k") == 25
        for i, persona in enumerate(personas(vipune_tiny_model_dir, 2)):
            query, by_binary = real_vipune.binary_rankings(binary, persona, vipune_hf_home, tmp_path / f"b{i}")
            assert lane_rankings(lane, persona, query, tmp_path / "dbs") == by_binary, persona.question_id
    finally:
        write_dated(rrf, edited)


def test_a_build_that_fails_keeps_the_previous_pair_and_names_the_users_file(k2_checkout, tmp_path):
    """A compile error is shown in the checkout's file, not the build's copy; a search edit that
    uses a module the vipune-lane does not compile builds the binary, then the vipune-lane fails: nothing is
    replaced (the binary was replaced before, and "build both again" failed the same way) and the
    message names the file lane/vipune_sources.json must list."""
    binary, lane = build_checkout(k2_checkout, "--fast")
    before = {path: sha(path) for path in (binary, lane)}
    rrf, search = k2_checkout / "src" / "rrf.rs", k2_checkout / "src" / "memory" / "search.rs"
    lib, module = k2_checkout / "src" / "lib.rs", k2_checkout / "src" / "extra_weight.rs"
    originals = {path: path.read_text() for path in (rrf, search, lib)}
    home = binary.parent.parent
    try:
        write_dated(rrf, originals[rrf] + "\nfn broken( {\n")
        proc = subprocess.run(
            ["bash", str(BUILD), "--checkout", str(k2_checkout), "--fast"], capture_output=True, text=True, timeout=1800
        )
        assert proc.returncode != 0 and f"--> {rrf}:" in proc.stderr, proc.stderr[-3000:]
        shown = [line for line in proc.stderr.splitlines() if "-->" in line or "Compiling vipune " in line]
        assert shown and not [line for line in shown if str(home / "src") in line]  # never the build's copy
        assert {path: sha(path) for path in before} == before
        write_dated(rrf, originals[rrf])
        write_dated(lib, originals[lib].replace("mod rrf;", "mod rrf;\npub mod extra_weight;", 1))
        write_dated(module, "pub const WEIGHT: f64 = 1.0;\n")
        write_dated(
            search,
            originals[search] + "\n#[allow(dead_code)]\nfn extra_weight() -> f64 {\n"
            "    crate::extra_weight::WEIGHT\n}\n",
        )
        proc = subprocess.run(
            ["bash", str(BUILD), "--checkout", str(k2_checkout), "--fast"], capture_output=True, text=True, timeout=1800
        )
        assert proc.returncode != 0
        assert 'they use crate::extra_weight, which it does not list: add "src/extra_weight.rs" there' in proc.stderr, (
            proc.stderr[-3000:]
        )
        assert f"nothing was replaced: {home}/bin is the previous build" in proc.stderr
        assert {path: sha(path) for path in before} == before and find_lane(binary, "checkout") == lane
        assert binary.resolve().parent == lane.resolve().parent  # bin/ still the one build
    finally:
        module.unlink(missing_ok=True)
        for path, text in originals.items():
            write_dated(path, text)


def test_builds_of_one_checkout_wait_for_each_other(k60_checkout):
    """One build holds the checkout's lock (flock on its build folder's .lock); another waits,
    saying so, and then runs."""
    binary, _ = build_checkout(k60_checkout, "--fast")
    lock = binary.parent.parent / ".lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as the first build holds it
        proc = subprocess.Popen(
            ["bash", str(BUILD), "--checkout", str(k60_checkout), "--fast"],
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        time.sleep(5)
        assert proc.poll() is None  # it waits
    out, err = proc.communicate(timeout=1800)
    assert proc.returncode == 0, err[-3000:]
    assert f"waiting for another build of {k60_checkout} to finish ({lock})" in err and Path(out.strip()) == binary


def finished_lib_run(results: Path, personas: list[Persona], builds: dict[str, tuple[Path, Path]]) -> Path:
    """``results/`` of a lib-lane run of ``personas`` by each build (id → its binary and lane), as the
    workflow leaves it for ``vipune-eval explain``: the view's files, each build's search (the job's
    own function: run files, status, arms) and score, and the manifest naming them (the first build
    the primary). Gold: each persona's first row."""
    filtered = results / "filter"
    shard = write_shard(filtered, personas)
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "question_id": p.question_id,
                    "question_type": "multi-session",
                    "question": p.question,
                    "question_date": "",
                    "split": "test",
                    "gold": p.session_ids[:1],
                    "gold_source": "answer_session_ids",
                    "session_ids": p.session_ids,
                    "user_side_evidence": True,
                }
                for p in personas
            ],
            schema=PAIRS_SCHEMA,
        ),
        filtered / "pairs.parquet",
    )
    (filtered / "qrels.txt").write_text("".join(f"{p.question_id} 0 {p.session_ids[0]} 1\n" for p in personas))
    explained = []
    for build, (binary, lane) in builds.items():
        run = results / "search" / f"vipune-lib-{build}"
        run.mkdir(parents=True)
        sha = hashlib.sha256(binary.read_bytes()).hexdigest()
        (run / "lane.json").write_text(
            json.dumps(lane_fingerprint(lane, {"id": build, "version": "0.20.2", "sha256": sha}, 60))
        )
        run_vipune_lib(
            shard,
            VipuneSettings("", Path(), None, run / "tmp", 60),
            lane,
            run / "lane.json",
            "stop",
            run / "shard-0-of-1.run",
            run / "semantic.run",
            run / "status.json",
            run / "shard-0-of-1.arms.parquet",
        )
        run_score(
            filtered / "qrels.txt",
            filtered / "pairs.parquet",
            [run / "shard-0-of-1.run"],
            Scoring([1, 5, 10], ["recall"], RankingSettings(10, 10)),
            f"vipune-lib-{build}",
            results / "runs" / f"vipune-lib-{build}.run",
            results / "metrics" / f"vipune-lib-{build}.json",
            status=[run / "status.json"],
        )
        explained.append(
            {
                "build": build,
                "binary": None,
                "lib": f"results/metrics/vipune-lib-{build}.json",
                "arms": [f"results/search/vipune-lib-{build}/shard-0-of-1.arms.parquet"],
            }
        )
    view = {name: f"results/filter/{name}.parquet" for name in ("pairs", "rows", "texts")}
    (results / "report-inputs.json").write_text(json.dumps({"views": [view], "explained": explained}))
    return results


def test_explain_on_a_moved_question_shows_arm_ranks_whose_fusion_gives_both_builds_lists(
    k60_checkout, vipune_hf_home, vipune_tiny_model_dir, tmp_path, capsys
):
    """Issue 52 item 5: the release's sources with RRF k = 60 (src/rrf.rs), built --fast, against
    the release. On a question whose hybrid top 10 the edit moved, `vipune-eval explain` (on the
    files a lib-lane run leaves) shows each build's list with its hits' ranks in vipune's two arms,
    as each build's own lane recorded them inside its rrf_fusion, and the k it fused with; fused
    with that k, those ranks give the very list and scores each build's binary returns."""
    k60 = build_checkout(k60_checkout, "--fast")
    release = release_build()
    fed, binary_lists = [], {}
    for i, persona in enumerate(personas(vipune_tiny_model_dir)):
        query, by_k60 = real_vipune.binary_rankings(k60[0], persona, vipune_hf_home, tmp_path / f"k60-{i}")
        _, by_release = real_vipune.binary_rankings(release[0], persona, vipune_hf_home, tmp_path / f"release-{i}")
        fed.append(dataclasses.replace(persona, query_vector=query))
        binary_lists[persona.question_id] = {"k60": by_k60["hybrid"], "release": by_release["hybrid"]}
    moved = [q for q, lists in binary_lists.items() if [i for i, _ in lists["k60"]] != [i for i, _ in lists["release"]]]
    assert moved, "the k = 60 edit moved no hybrid list of these personas"
    results = finished_lib_run(tmp_path / "run" / "results", fed, {"k60": k60, "release": release})
    explain.run_explain(moved[0], results)
    out = capsys.readouterr().out
    assert "k60 (primary): vipune-lib" in out and "fused (k 60)" in out and "fused (k 25)" in out
    assert "do not explain" not in out
    [explanation] = explain.explanations(
        json.loads((results / "report-inputs.json").read_text()), [moved[0]], lambda p: results.parent / p
    ).values()
    for column, k in zip(explanation["builds"], (60.0, 25.0)):
        assert column["k"] == k and column["mismatch"] is None and column["arms"] is None
        # the shown arm ranks, fused by hand with the shown k: the build's binary's own list and scores
        fused = [sum(1 / (k + hit[arm][0]) for arm in ("semantic", "bm25") if hit[arm]) for hit in column["top"]]
        binary = binary_lists[moved[0]][column["build"]]
        assert [hit["doc"] for hit in column["top"]] == [rid.split("::")[1] for rid, _ in binary][:10]
        assert fused == pytest.approx([score for _, score in binary][:10], rel=1e-12)
        assert [hit["fused"] for hit in column["top"]] == pytest.approx(fused, rel=1e-12)
