"""vipune-lane (lane/): vipune's own search code on cached vectors, many personas per process.

Every behaviour test runs on the fake lane (tests/support/fake_lane.py) and on the real one, built beside
the real vipune by .ci/vipune/build.sh (skipped, saying why, where it is not built): the fake is
checked against the real lane here, as the fake binary is against the real one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from support import real_vipune
from support.fakes import fake_build
from support.search import duplicated_haystack, search_persona
from vipune_eval.core.persona import Persona
from vipune_eval.errors import EvalError
from vipune_eval.vipune import lane_source
from vipune_eval.vipune.settings import VipuneSettings
from vipune_eval.vipune.vipune_lane import LaneError, VipuneLane, find_lane, frame, lane_fingerprint, planned_lane

FLAGS = VipuneSettings("", Path(), None, Path(), 60).query_flags(10)  # the binary's options, limit 10
WORDS = "cat dog luna adopted named my the what is of a walk park rain sunny".split()


@pytest.fixture(scope="module", params=["fake", real_vipune.RELEASE, real_vipune.OLDER])
def build(request, tmp_path_factory) -> tuple[Path, Path]:
    """(binary, lane) of the fake, and of each real release build.sh has built with its vipune-lane."""
    if request.param == "fake":
        return fake_build(tmp_path_factory.mktemp("fake-build"))
    binary, why = real_vipune.find(request.param)
    if binary is not None:
        try:
            return binary, find_lane(binary, request.param)
        except LaneError as exc:
            why = exc.message
    if real_vipune.required():
        pytest.fail(f"{real_vipune.REQUIRED}=required, but {why}")
    pytest.skip(why)


def random_persona(seed: int, rows: int, dims: int = 384) -> Persona:
    """Rows of a small vocabulary (so the AND query matches some), created_at and vectors with
    exact ties (so the tie-breaks decide), and a question that may match nothing."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(rows, dims)).astype(np.float32)
    vectors[1::7] = vectors[0]  # exact cosine ties
    days = rng.integers(1, 4, rows)
    qid = f"q{seed}"
    return Persona(
        question_id=qid,
        question=" " + " ".join(rng.choice(WORDS, 3)) + "? ",
        row_ids=[f"{qid}::s{i}" for i in range(rows)],
        session_ids=[f"s{i}" for i in range(rows)],
        created_at=[f"2023-01-0{d}T00:00:00Z" for d in days],
        texts=["user: " + " ".join(rng.choice(WORDS, rng.integers(3, 12))) for _ in range(rows)],
        vectors=vectors,
        query_vector=vectors[0] + rng.normal(scale=0.5, size=dims).astype(np.float32),
        query_tokens=6,
    )


PERSONAS = [random_persona(seed, rows) for seed, rows in enumerate([5, 40, 120, 60, 1, 300])]


def test_the_lane_ranks_exactly_as_vipunes_mirrors(build, tmp_path):
    """vipune-lib-semantic = dense and vipune-lib = hybrid, ids in order and scores, on every list:
    the mirrors are the references the real binary is checked against (test_real_vipune)."""
    binary, lane = build
    answers = list(VipuneLane(lane, tmp_path / "dbs", timeout=60).search(PERSONAS, FLAGS))
    assert [p.question_id for p, _ in answers] == [p.question_id for p in PERSONAS]
    for persona, answer in answers:
        mirror = search_persona(persona, ["dense", "hybrid"], limit=10)
        for lane_ranking, name in (("semantic", "dense"), ("hybrid", "hybrid")):
            assert [rid for rid, _ in answer[lane_ranking]] == [rid for rid, _ in mirror[name]], (
                persona.question_id,
                name,
            )
            assert [s for _, s in answer[lane_ranking]] == pytest.approx([s for _, s in mirror[name]], rel=1e-6)
        assert set(answer["seconds"]) == {"open", "insert", "semantic", "hybrid"}
    assert not list((tmp_path / "dbs").glob("*.db"))  # every throwaway database removed


def test_with_arms_the_lane_answers_the_two_lists_its_hybrid_search_fused(build, tmp_path):
    """--arms: one rrf_fusion call per hybrid search (recorded inside vipune's own, in the real
    lane), k 25, its lists vipune's semantic arm and BM25 arm at the candidate pool clamp(10 x
    limit, 50, 10000) = 100: the mirrors' dense and bm25 arms, ids in order and scores (SQLite's
    bm25(), lower is better); without --arms the answer has no such key."""
    binary, lane = build
    plain = [answer for _, answer in VipuneLane(lane, tmp_path / "dbs", timeout=60).search(PERSONAS[:2], FLAGS)]
    assert not any("fusions" in answer for answer in plain)
    for persona, answer in VipuneLane(lane, tmp_path / "dbs", timeout=60, arms=True).search(PERSONAS, FLAGS):
        [fusion] = answer["fusions"]
        assert fusion["k"] == 25.0 and "unrecorded_arms" not in answer
        mirror = search_persona(persona, ["dense", "bm25"], limit=100)
        for hits, name, sign in zip(fusion["lists"], ("dense", "bm25"), (1, -1)):  # the mirror's bm25 is -bm25()
            assert [rid for rid, _ in hits] == [rid for rid, _ in mirror[name]], (persona.question_id, name)
            assert [s for _, s in hits] == pytest.approx([sign * s for _, s in mirror[name]], rel=1e-6)
        assert fusion["lists"][0][: len(answer["semantic"])] == answer["semantic"]  # how the arms are told apart


def test_the_lane_and_the_mirror_rank_a_haystack_of_repeated_sessions_alike(build, tmp_path):
    """Issue 44 item 3: each copy ties with its original exactly, in the vipune-lane (vipune's own code)
    and in dense, and ranks after it; a matrix product gave some copies other last bits."""
    binary, lane = build
    personas = [duplicated_haystack(seed, sessions) for seed, sessions in enumerate(range(3, 40))]
    flags = VipuneSettings("", Path(), None, Path(), 60).query_flags(100)
    for persona, answer in VipuneLane(lane, tmp_path / "dbs", timeout=60).search(personas, flags):
        mirror = search_persona(persona, ["dense"], limit=100)["dense"]
        assert [rid for rid, _ in answer["semantic"]] == [rid for rid, _ in mirror], persona.question_id


# What vipune's search refuses, checked by vipune's own code in the real lane (search.rs's
# validate_input_length, the copied token check), with its message and the binary's exit code.
REFUSALS = [
    ("   ", 0, "Input cannot be empty", 1),
    ("x" * 100_001, 3, "Input too long: 100001 characters (max: 100000)", 1),
    ("what is my cat named?", 513, "content exceeds 512-token embedding limit (measured: 513 tokens)", 3),
]


@pytest.mark.parametrize("question, tokens, message, code", REFUSALS)
def test_the_lane_refuses_what_vipunes_search_refuses_with_its_message_and_exit_code(
    build, tmp_path, question, tokens, message, code
):
    binary, lane = build
    refused = dataclasses.replace(PERSONAS[1], question=question, query_tokens=tokens)
    answers = list(VipuneLane(lane, tmp_path / "dbs", timeout=60).search([PERSONAS[0], refused, PERSONAS[2]], FLAGS))
    assert answers[1][1] == {"question_id": refused.question_id, "error": message, "exit_code": code}
    assert "hybrid" in answers[0][1] and "hybrid" in answers[2][1]


def test_a_question_of_512_tokens_is_searched(build, tmp_path):
    binary, lane = build
    at_the_limit = dataclasses.replace(PERSONAS[1], query_tokens=512)
    [(_, answer)] = VipuneLane(lane, tmp_path / "dbs", timeout=60).search([at_the_limit], FLAGS)
    assert len(answer["hybrid"]) == 10


def test_the_lane_names_its_build_and_the_binary_beside_it(build):
    binary, lane = build
    fingerprint = lane_fingerprint(lane, {"id": "x", "version": "0.20.2", "sha256": _sha(binary)}, timeout=30)
    assert fingerprint["kind"] == "vipune-lane" and fingerprint["sha256"] == _sha(lane)
    assert fingerprint["id"].startswith(f"{fingerprint['version']}-") and fingerprint["binary"] == "x"
    with pytest.raises(LaneError, match="built beside a vipune binary with sha256"):
        lane_fingerprint(lane, {"id": "0.20.2-aaaaaaaaaaaa", "version": "0.20.2", "sha256": "a" * 64}, timeout=30)


def test_a_lane_slower_than_the_timeout_at_its_version_check_is_named_as_a_timeout(build):
    """Issue 44 item 7: not blamed on the build ("build it again" cannot help)."""
    binary, lane = build
    with pytest.raises(LaneError, match=r"did not print its build within 1e-06 s \(vipune.timeout\)") as caught:
        lane_fingerprint(lane, {"id": "x", "version": "0.20.2", "sha256": _sha(binary)}, timeout=1e-6)
    assert "raise vipune.timeout" in caught.value.fix and "build.sh" not in caught.value.fix


def test_the_real_lane_was_built_from_this_checkouts_lane_sources(build):
    binary, lane = build
    said = json.loads(subprocess.run([str(lane), "version"], capture_output=True, text=True, check=True).stdout)
    if "fake" in said["vipune_source"]:
        pytest.skip("the fake lane has no sources of its own")
    assert said["lane_source"] == lane_source.source_sha256()
    assert said["calls"] == [
        "Database::open",
        "Database::insert_with_id",
        "MemoryStore::new",
        "MemoryStore::search",
        "MemoryStore::search_hybrid",
    ]
    assert [c["file"] for c in said["sources"]["compiled"]] == lane_source.listed()["compiled"]
    assert all(copy["same"] for copy in said["sources"]["copies"])  # a release: every copy as pinned
    assert said["vipune"] in (real_vipune.RELEASE, real_vipune.OLDER)
    assert said["binary_sha256"] == _sha(binary)


def test_a_kept_store_is_the_database_as_seeded_and_searching_a_copy_of_it_ranks_as_seeding(build, tmp_path):
    """Kept stores (issue 54): "keep" copies each database once seeded, before any search opens
    it; "seeded" copies a kept store instead of seeding (no rows sent, the question's vector
    alone); both answers are the same rankings and scores, and the kept file never changes."""
    binary, lane = build
    kept = tmp_path / "kept"
    kept.mkdir()
    stores = {p.question_id: {"keep": str(kept / f"{p.question_id}.db")} for p in PERSONAS}
    seeding = {
        p.question_id: answer
        for p, answer in VipuneLane(lane, tmp_path / "dbs", 60, store=lambda p: stores[p.question_id]).search(
            PERSONAS, FLAGS
        )
    }
    before = {path.name: _sha(path) for path in kept.iterdir()}
    assert sorted(before) == sorted(f"{p.question_id}.db" for p in PERSONAS)
    reused = {
        p.question_id: answer
        for p, answer in VipuneLane(
            lane, tmp_path / "dbs", 60, store=lambda p: {"seeded": str(kept / f"{p.question_id}.db")}
        ).search(PERSONAS, FLAGS)
    }
    for persona in PERSONAS:
        a, b = seeding[persona.question_id], reused[persona.question_id]
        assert (a["semantic"], a["hybrid"]) == (b["semantic"], b["hybrid"]), persona.question_id
        assert (
            {"open", "insert", "keep"} <= set(a["seconds"]) and "copy" in b["seconds"] and "insert" not in b["seconds"]
        )
    assert {path.name: _sha(path) for path in kept.iterdir()} == before
    assert not list((tmp_path / "dbs").glob("*.db"))  # every copy removed


def test_a_copy_that_cannot_be_kept_is_named_and_the_persona_still_searched(build, tmp_path):
    binary, lane = build
    store = {"keep": str(tmp_path / "no-such-folder" / "q0.db")}
    [(_, answer)] = VipuneLane(lane, tmp_path / "dbs", 60, store=lambda p: store).search(PERSONAS[:1], FLAGS)
    assert "copying the seeded database to" in answer["keep_error"] and answer["hybrid"]
    header = json.loads(frame(PERSONAS[0], FLAGS).split(b"\n", 1)[0])
    header["seeded"] = str(tmp_path / "any.db")  # a kept store comes without rows
    bad = json.dumps(header).encode() + b"\n" + frame(PERSONAS[0], FLAGS).split(b"\n", 1)[1]
    out = subprocess.run([str(lane), "search", "--tmp", str(tmp_path)], input=bad, capture_output=True)
    assert (
        out.returncode == 2 and "a kept store" in out.stderr.decode() and PERSONAS[0].question_id in out.stderr.decode()
    )


def test_a_malformed_stream_stops_the_lane_naming_the_persona(build, tmp_path):
    binary, lane = build
    cut = frame(PERSONAS[1], FLAGS)[:-100]  # its vectors end early
    out = subprocess.run(
        [str(lane), "search", "--tmp", str(tmp_path)], input=frame(PERSONAS[0], FLAGS) + cut, capture_output=True
    )
    assert out.returncode == 2 and PERSONAS[1].question_id in out.stderr.decode()
    assert json.loads(out.stdout.splitlines()[0])["question_id"] == PERSONAS[0].question_id


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- the harness's side (fake lane)


@pytest.fixture
def fake(tmp_path) -> tuple[Path, Path]:
    return fake_build(tmp_path / "build")


@pytest.mark.parametrize(
    "fault, expected",
    [
        ("crash", r"ended \(exit 1\) before answering; stderr: .*injected crash"),
        ("garbage", "not this persona's JSON line"),
    ],
)
def test_a_lane_that_breaks_off_is_named_with_its_persona(fake, tmp_path, monkeypatch, fault, expected):
    monkeypatch.setenv("FAKE_LANE_FAULT", fault)
    monkeypatch.setenv("FAKE_LANE_FAULT_MATCH", PERSONAS[2].question)
    run = VipuneLane(fake[1], tmp_path / "dbs", timeout=60)
    answered = []
    with pytest.raises(LaneError, match=f"persona {PERSONAS[2].question_id}: .*{expected}"):
        for persona, _ in run.search(PERSONAS, FLAGS):
            answered.append(persona.question_id)
    assert answered == [p.question_id for p in PERSONAS[:2]]


def test_a_lane_that_hangs_is_killed_after_the_timeout(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_LANE_FAULT", "hang")
    with pytest.raises(LaneError, match=f"persona {PERSONAS[0].question_id}: .*no answer within 2 s"):
        list(VipuneLane(fake[1], tmp_path / "dbs", timeout=2).search(PERSONAS, FLAGS))


@pytest.mark.parametrize(
    "fault, timeout, expected",
    [
        ("crash", 60, r"ended \(exit 1\) before answering; stderr: .*injected crash"),
        ("hang", 2, "gave no answer within 2 s"),
        ("garbage", 60, "not this persona's JSON line"),
    ],
)
def test_under_record_a_persona_the_lane_breaks_on_is_answered_with_why_and_a_new_lane_goes_on(
    fake, tmp_path, monkeypatch, fault, timeout, expected
):
    """vipune.on_error: record: the persona it crashed, hung or broke the protocol on carries the
    error, and every persona after it (those already sent to the dead lane too) is answered."""
    monkeypatch.setenv("FAKE_LANE_FAULT", fault)
    monkeypatch.setenv("FAKE_LANE_FAULT_MATCH", PERSONAS[2].question)
    answers = list(VipuneLane(fake[1], tmp_path / "dbs", timeout).search(PERSONAS, FLAGS, record=True))
    assert [p.question_id for p, _ in answers] == [p.question_id for p in PERSONAS]
    broken = answers[2][1]
    assert set(broken) == {"question_id", "broken", "timeout"} and re.search(expected, broken["broken"])
    assert broken["timeout"] == (timeout if fault == "hang" else None)  # a hang is a timeout, as a field
    assert all("hybrid" in answer for p, answer in answers if p is not PERSONAS[2])


def test_under_record_a_lane_that_hangs_at_start_is_started_once_per_persona_never_for_none(
    fake, tmp_path, monkeypatch
):
    """Issue 51 item 6: after the last persona's timeout a new lane was started for zero personas,
    and waited on: it hung too, and the job failed with "did not exit within 1 s after answering
    the last persona" (it had answered none)."""
    monkeypatch.setenv("FAKE_LANE_FAULT", "hang-at-start")
    monkeypatch.setenv("FAKE_LANE_STARTS", str(tmp_path / "starts"))
    answers = list(VipuneLane(fake[1], tmp_path / "dbs", 1).search(PERSONAS[:2], FLAGS, record=True))
    assert [(p.question_id, a["timeout"]) for p, a in answers] == [(p.question_id, 1) for p in PERSONAS[:2]]
    assert all("gave no answer within 1 s (vipune.timeout)" in a["broken"] for _, a in answers)
    assert (tmp_path / "starts").read_text().splitlines() == ["search", "search"]


JOB = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from support.search import duplicated_haystack
from vipune_eval.vipune.settings import VipuneSettings
from vipune_eval.vipune.vipune_lane import VipuneLane
personas = (duplicated_haystack(seed, 200) for seed in range(1000))  # made as the vipune-lane takes them
flags = VipuneSettings("", Path(), None, Path(), 600).query_flags(10)
for persona, answer in VipuneLane(Path(sys.argv[1]), Path(sys.argv[2]), 600).search(personas, flags):
    print(persona.question_id, flush=True)
"""


def processes_naming(text: str) -> list[int]:
    """The pids whose command line holds ``text``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            pass
    return found


def test_a_job_killed_with_its_process_group_leaves_no_lane_and_no_databases(build, tmp_path, monkeypatch):
    """Issue 44 item 4: the vipune-lane runs in a session of its own (killed with a wrapper script's
    children), so a kill -9 of Snakemake's group missed it: it lived on (a hung one for ever) and
    its folder of databases in /dev/shm stayed. A watchdog outside the group ends both."""
    binary, lane = build
    monkeypatch.setenv("FAKE_LANE_FAULT", "hang")  # the fake lane hangs; the real one works on
    folder = tmp_path / "dbs-of-this-job"
    job = subprocess.Popen(
        [sys.executable, "-c", JOB, str(lane), str(folder), str(Path(__file__).parents[2])],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not [pid for pid in processes_naming(str(folder)) if pid != job.pid]:
        assert job.poll() is None and time.monotonic() < deadline, "the vipune-lane never started"
        time.sleep(0.05)
    time.sleep(0.5)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    deadline = time.monotonic() + 10
    while (processes_naming(str(folder)) or folder.exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_naming(str(folder)) == [], "the vipune-lane outlived its job"
    assert not folder.exists(), "its databases outlived its job"


def test_a_persona_that_cannot_be_framed_raises_its_own_error_not_a_lane_crash(fake, tmp_path):
    broken = dataclasses.replace(PERSONAS[1], vectors=PERSONAS[1].vectors[:, :10])  # 10 dims, its query 384
    with pytest.raises(ValueError, match="dimension"):
        list(VipuneLane(fake[1], tmp_path / "dbs", 60).search([PERSONAS[0], broken, PERSONAS[2]], FLAGS, record=True))


def test_a_persona_the_lane_refuses_is_answered_with_its_error(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_LANE_FAULT", "refuse")
    monkeypatch.setenv("FAKE_LANE_FAULT_MATCH", PERSONAS[1].question)
    answers = dict((p.question_id, a) for p, a in VipuneLane(fake[1], tmp_path / "dbs", 60).search(PERSONAS, FLAGS))
    assert answers[PERSONAS[1].question_id] == {
        "question_id": PERSONAS[1].question_id,
        "error": "injected refusal",
        "exit_code": 1,
    }
    assert all("hybrid" in answers[p.question_id] for p in PERSONAS if p is not PERSONAS[1])


def test_a_missing_lane_is_refused_with_the_command_that_builds_it(fake):
    binary, lane = fake
    lane.unlink()
    with pytest.raises(LaneError) as caught:
        find_lane(binary, "0.20.2")
    assert str(lane) in caught.value.message and ".ci/vipune/build.sh 0.20.2" in caught.value.fix


def test_a_lane_whose_bytes_changed_is_not_the_one_a_result_was_planned_for(fake, tmp_path):
    binary, lane = fake
    fingerprint = tmp_path / "lane.json"
    fingerprint.write_text(
        json.dumps(lane_fingerprint(lane, {"id": "x", "version": "0.20.2", "sha256": _sha(binary)}, 30))
    )
    copy = planned_lane(lane, fingerprint, tmp_path / "job")
    assert copy.parent == tmp_path / "job" and copy.name == lane.name and _sha(copy) == _sha(lane)
    lane.write_text(lane.read_text() + "\n")
    with pytest.raises(EvalError, match="is not the vipune-lane this result belongs to"):
        planned_lane(lane, fingerprint, tmp_path / "job")
    lane.unlink()
    with pytest.raises(EvalError, match="the vipune-lane this job was planned for, is gone"):
        planned_lane(lane, fingerprint, tmp_path / "job")


def test_the_lane_is_named_after_its_sources_as_build_sh_names_it(tmp_path):
    said = subprocess.run(
        [sys.executable, str(Path(lane_source.__file__))], capture_output=True, text=True, check=True
    ).stdout.split()
    assert said == [lane_source.source_sha256(), lane_source.lane_name(lane_source.source_sha256())]
    copy = tmp_path / "lane"
    (copy / "src").mkdir(parents=True)
    for path in lane_source.files():
        (copy / path.relative_to(lane_source.LANE)).write_bytes(path.read_bytes())
    assert lane_source.source_sha256(copy) == lane_source.source_sha256()
    (copy / "src" / "main.rs").write_text((copy / "src" / "main.rs").read_text() + "// an edit\n")
    assert lane_source.source_sha256(copy) != lane_source.source_sha256()
