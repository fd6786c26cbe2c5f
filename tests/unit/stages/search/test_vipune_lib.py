"""stages/search/vipune_lib.py: where the lib lane's throwaway databases live (RAM, else the job's
scratch folder: a full or read-only /dev/shm included), what a killed job left there, and what its
status file records of a persona it fails. The vipune-lane's searches themselves are tested through the
workflow (tests/workflow/test_workflow.py, test_reruns.py) and the vipune-lane's protocol in
tests/unit/vipune/test_vipune_lane.py."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from support.fakes import fake_build
from support.search import write_shard
from vipune_eval.core.persona import Persona, ShardSearch
from vipune_eval.core.ranking_settings import RankingSettings
from vipune_eval.core.trec import read_run
from vipune_eval.stages.search import vipune_lib
from vipune_eval.stages.search.vipune_lib import clear_stale_databases, database_folder, run_vipune_lib
from vipune_eval.vipune.settings import VipuneSettings
from vipune_eval.vipune.vipune_lane import lane_fingerprint


def test_the_databases_go_to_ram_in_a_folder_the_jobs_next_attempt_finds_and_empties(tmp_path):
    ram, tmp = tmp_path / "shm", tmp_path / "job-tmp"
    ram.mkdir()
    first = database_folder(tmp, ram)
    assert first.parent == ram and first.is_dir() and not tmp.exists()
    (first / "persona-7.db").write_bytes(b"left by a killed attempt")
    again = database_folder(tmp, ram)
    assert again == first and [p.name for p in again.iterdir()] == [".job"]  # the same job's folder, emptied
    assert database_folder(tmp_path / "other-job", ram) != first


def test_without_ram_the_databases_go_to_the_jobs_scratch_folder_emptied(tmp_path):
    tmp = tmp_path / "job-tmp"
    tmp.mkdir()
    (tmp / "stale.db").write_bytes(b"x")
    assert database_folder(tmp, tmp_path / "no-shm") == tmp and list(tmp.iterdir()) == []


def test_a_run_start_removes_the_ram_folders_its_killed_jobs_left_and_no_others(tmp_path):
    """Issue 44 item 4: a killed job's folder stayed in RAM until that very job ran again."""
    ram, results = tmp_path / "shm", tmp_path / "run" / "results"
    ram.mkdir()
    ours = [database_folder(results / "tmp" / "search" / f"shard-{i}", ram) for i in range(2)]
    other = database_folder(tmp_path / "another-run" / "results" / "tmp" / "shard-0", ram)
    foreign = ram / "vipune-lib-0123456789abcdef"  # no .job file: not known to be a job's
    foreign.mkdir()
    assert sorted(clear_stale_databases(results / "tmp", ram)) == sorted(ours)
    assert not any(folder.exists() for folder in ours) and other.is_dir() and foreign.is_dir()


# ---------------------------------------------------------------- a full or read-only /dev/shm (issue 44 item 5)


@pytest.fixture
def tmpfs(tmp_path):
    """``mount(name, options)``: a tmpfs of its own under tmp_path (root only; skipped elsewhere)."""
    mounted = []

    def mount(name: str, options: str) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        out = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, text=True
        )
        if out.returncode:
            pytest.skip(f"cannot mount a tmpfs here (it needs root): {out.stderr.strip()}")
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def persona(seed: int, rows: int, words: int) -> Persona:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(rows, 384)).astype(np.float32)
    qid = f"q{seed}"
    return Persona(
        qid,
        "where did I park the red car?",
        [f"{qid}::s{i}" for i in range(rows)],
        [f"s{i}" for i in range(rows)],
        ["2023-01-01T00:00:00Z"] * rows,
        [f"user: the red car {i} " + "parked word " * words for i in range(rows)],
        vectors,
        vectors[rng.integers(rows)],
    )


# a persona whose database outgrows a 1 MiB tmpfs between two that fit
PERSONAS = [persona(0, 5, 3), persona(1, 300, 150), persona(2, 5, 3)]


@pytest.fixture
def lane_files(any_lane, tmp_path):
    """(lane, its fingerprint file) of the fake vipune's build and the real one's."""
    binary, lane = any_lane
    binary = {"id": "x", "version": "0.20.2", "sha256": hashlib.sha256(binary.read_bytes()).hexdigest()}
    fingerprint = tmp_path / "lane.json"
    fingerprint.write_text(json.dumps(lane_fingerprint(lane, binary, 30)))
    return lane, fingerprint


def search_shard(shard, lane_files, folder: Path, ram: Path, monkeypatch) -> tuple[dict, dict]:
    monkeypatch.setattr(vipune_lib, "RAM", ram)
    runs = {name: folder / f"{name}.run" for name in ("hybrid", "semantic")}
    run_vipune_lib(
        shard,
        VipuneSettings("", Path(), None, folder / "tmp", 60),
        *lane_files,
        on_error="stop",
        out=runs["hybrid"],
        semantic_out=runs["semantic"],
        status_out=folder / "status.json",
        arms_out=folder / "arms.parquet",
    )
    return (
        {name: dict(read_run([path])) for name, path in runs.items()},
        json.loads((folder / "status.json").read_text()),
    )


def test_personas_a_full_ram_folder_refuses_are_searched_again_in_the_scratch_folder(
    lane_files, tmp_path, tmpfs, monkeypatch, caplog
):
    """'database or disk is full' failed every pair it reached, and on_error: record would have
    recorded them all: now the vipune-lane searches them again on disk, under either policy."""
    shard = write_shard(tmp_path / "view", PERSONAS)
    expected, _ = search_shard(shard, lane_files, tmp_path / "on-disk", tmp_path / "no-shm", monkeypatch)
    small = tmpfs("small-shm", "size=1m")
    with caplog.at_level(logging.WARNING, logger="vipune_eval"):
        runs, status = search_shard(shard, lane_files, tmp_path / "in-ram", small, monkeypatch)
    assert runs == expected and status["failed"] == {}
    assert list(runs["hybrid"]) == [p.question_id for p in PERSONAS]  # the shard's order
    # what each persona's search was made from, for the gate (issue 52): its flags and digests
    assert status["searched"]["personas"] == {p.question_id: p.digests() for p in PERSONAS}
    assert status["searched"]["settings"]["flags"][:2] == ["--recency", "0"]
    assert f"{small} is full" in caplog.text and "1 personas searched again" in caplog.text
    assert list(small.iterdir()) == []  # its folder removed


@pytest.mark.parametrize("state", ["full", "read-only"])
def test_a_ram_folder_that_takes_no_file_sends_the_databases_to_the_scratch_folder_saying_why(
    lane_files, tmp_path, tmpfs, monkeypatch, caplog, state
):
    shard = write_shard(tmp_path / "view", PERSONAS[:1])
    ram = tmpfs("shm", "size=64k" if state == "full" else "ro,size=64k")
    if state == "full":
        filler = os.open(ram / "filler", os.O_WRONLY | os.O_CREAT)
        with pytest.raises(OSError, match="No space left"):
            while True:
                os.write(filler, b"\0" * 4096)
        os.close(filler)
    with caplog.at_level(logging.WARNING, logger="vipune_eval"):
        runs, status = search_shard(shard, lane_files, tmp_path / "run", ram, monkeypatch)
    assert status["failed"] == {} and list(runs["hybrid"]) == [PERSONAS[0].question_id]
    why = "No space left on device" if state == "full" else "Read-only file system"
    assert f"{ram} cannot hold the throwaway databases ({why})" in caplog.text


def shard(folder: Path, questions: list[str]) -> ShardSearch:
    """One shard of a view's files: a persona per question, three rows each, bge-small's 384 dimensions."""
    rng = np.random.default_rng(0)
    n = len(questions)
    ids = [f"t{i}" for i in range(4 * n)]
    vectors = rng.standard_normal((4 * n, 384)).astype(np.float32)
    pq.write_table(
        pa.table({"text_id": ids, "text": [f"user: text {i}" for i in range(4 * n)]}), folder / "texts.parquet"
    )
    pq.write_table(
        pa.table(
            {
                "text_id": ids,
                "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 384),
                "tokens": pa.array([5] * (4 * n), pa.int32()),
            }
        ),
        folder / "embeddings.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "question_id": [f"q{p}" for p in range(n)],
                "question": questions,
                "question_text_id": [f"t{4 * p + 3}" for p in range(n)],
                "row_keys": [[f"s{r}" for r in range(3)] for _ in range(n)],
                "row_sessions": [[f"s{r}" for r in range(3)] for _ in range(n)],
                "row_created_at": [["2023-01-01T00:00:00Z"] * 3 for _ in range(n)],
                "row_docs": [[f"s{r}" for r in range(3)] for _ in range(n)],
                "row_text_ids": [[f"t{4 * p + r}" for r in range(3)] for p in range(n)],
            }
        ),
        folder / "rows.parquet",
    )
    return ShardSearch(
        folder / "rows.parquet",
        folder / "texts.parquet",
        [folder / "embeddings.parquet"],
        0,
        1,
        RankingSettings(10, 10),
    )


@pytest.mark.parametrize(
    "fault, detail, code, error",
    [
        # vipune's own message, and the exit code the binary gives it
        (
            "refuse",
            r"persona q1: vipune-lane refused it \(`vipune search` exits 1 on it\): injected refusal",
            1,
            "injected refusal",
        ),
        (
            "crash",
            r"persona q1: vipune-lane: `.*` ended \(exit 1\) before answering",
            None,
            None,
        ),  # vipune said nothing
        # issue 51 item 6: a hang is a timeout, recorded as one (the report said "no exit code and no message")
        ("hang", r"persona q1: vipune-lane: `.*` gave no answer within 2 s \(vipune.timeout\)", None, None),
    ],
)
def test_a_persona_the_lane_fails_is_recorded_with_vipunes_message_and_exit_code_as_fields(
    tmp_path, monkeypatch, fault, detail, code, error
):
    """Under vipune.on_error: record the status file records what happened, vipune's own message
    (a refusal's) and the binary's exit code for it (none where vipune said nothing) as fields
    (core.failed_pair); the other personas are searched."""
    binary, lane = fake_build(tmp_path)
    fingerprint = tmp_path / "lane.json"
    sha = hashlib.sha256(binary.read_bytes()).hexdigest()
    fingerprint.write_text(json.dumps(lane_fingerprint(lane, {"id": "x", "version": "0.20.2", "sha256": sha}, 30)))
    seconds = 2 if fault == "hang" else 30
    monkeypatch.setenv("FAKE_LANE_FAULT", fault)
    monkeypatch.setenv("FAKE_LANE_FAULT_MATCH", "second")
    status = tmp_path / "status.json"
    run_vipune_lib(
        shard(tmp_path, ["the first one?", "the second one?", "the third one?"]),
        VipuneSettings("", Path(), None, tmp_path / "tmp", seconds),
        lane,
        fingerprint,
        "record",
        tmp_path / "out.run",
        tmp_path / "semantic.run",
        status,
        tmp_path / "arms.parquet",
    )
    failed = json.loads(status.read_text())["failed"]
    assert list(failed) == ["q1"] and set(failed["q1"]) == {"detail", "exit_code", "error", "timeout"}
    assert failed["q1"]["timeout"] == (seconds if fault == "hang" else None)
    assert re.fullmatch(detail, failed["q1"]["detail"].split(";")[0])
    assert (failed["q1"]["exit_code"], failed["q1"]["error"]) == (code, error)
    assert {line.split()[0] for line in (tmp_path / "out.run").read_text().splitlines()} == {"q0", "q2"}


def test_a_lane_rebuilt_while_its_job_runs_is_not_what_the_job_starts_next(tmp_path, monkeypatch):
    """Issue 51 item 1: a job may start several lane processes (here a second after the vipune-lane
    crashed on a persona, under record); each runs the job's private copy of the planned lane, so
    the personas after a rebuild of the vipune-lane's file are searched as planned."""
    binary, lane = fake_build(tmp_path / "build")
    planned_text = lane.read_text()
    other = fake_build(tmp_path / "other-build", preamble="export FAKE_VIPUNE_FAULT=bm25-or\n")[1].read_text()
    sha = hashlib.sha256(binary.read_bytes()).hexdigest()
    personas = [
        dataclasses.replace(persona(seed, 30, 3), question=f"the red car {word}")
        for seed, word in enumerate(["first", "second", "third"])
    ]
    shard = write_shard(tmp_path / "view", personas)
    monkeypatch.setenv("FAKE_LANE_FAULT", "crash")
    monkeypatch.setenv("FAKE_LANE_FAULT_MATCH", "second")

    def search(name: str) -> dict:
        """Planned (the vipune-lane fingerprinted), then run."""
        out = tmp_path / name
        out.mkdir()
        fingerprint = out / "lane.json"
        fingerprint.write_text(json.dumps(lane_fingerprint(lane, {"id": "x", "version": "0.20.2", "sha256": sha}, 30)))
        run_vipune_lib(
            shard,
            VipuneSettings("", Path(), None, out / "tmp", 30),
            lane,
            fingerprint,
            "record",
            out / "hybrid.run",
            out / "semantic.run",
            out / "status.json",
            out / "arms.parquet",
        )
        assert list(json.loads((out / "status.json").read_text())["failed"]) == ["q1"]
        return {n: read_run([out / f"{n}.run"]) for n in ("hybrid", "semantic")}

    clean = search("clean")
    rebuild(lane, other)
    assert search("other")["hybrid"]["q2"] != clean["hybrid"]["q2"]  # the rebuilt lane ranks otherwise
    rebuild(lane, planned_text)
    shipped = ShardSearch.personas

    def personas_then_rebuild(self):
        for number, one in enumerate(shipped(self)):
            if number == 1:  # the first lane process runs; it crashes on this persona, and another starts
                rebuild(lane, other)
            yield one

    monkeypatch.setattr(ShardSearch, "personas", personas_then_rebuild)
    assert search("rebuilt") == clean


def rebuild(path: Path, text: str) -> None:
    """Replace ``path``'s bytes as a build does: a new file renamed over the old."""
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    part.chmod(0o755)
    os.replace(part, path)
