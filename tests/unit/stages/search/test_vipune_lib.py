"""stages/search/vipune_lib.py: where the lib lane's throwaway databases live, and what its status
file records of a persona it fails. The lane's searches themselves are tested through the workflow
(tests/workflow/test_workflow.py, test_reruns.py) and the lane's protocol in
tests/unit/vipune/test_lane.py."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vipune_eval.core.persona import ShardSearch
from vipune_eval.stages.search.vipune_lib import database_folder, run_vipune_lib
from vipune_eval.vipune.lane import lane_fingerprint

from support.fakes import fake_build


def test_the_databases_go_to_ram_in_a_folder_the_jobs_next_attempt_finds_and_empties(tmp_path):
    ram, tmp = tmp_path / "shm", tmp_path / "job-tmp"
    ram.mkdir()
    first = database_folder(tmp, ram)
    assert first.parent == ram and first.is_dir() and not tmp.exists()
    (first / "persona-7.db").write_bytes(b"left by a killed attempt")
    again = database_folder(tmp, ram)
    assert again == first and list(again.iterdir()) == []  # the same job's folder, emptied
    assert database_folder(tmp_path / "other-job", ram) != first


def test_without_ram_the_databases_go_to_the_jobs_scratch_folder_emptied(tmp_path):
    tmp = tmp_path / "job-tmp"
    tmp.mkdir()
    (tmp / "stale.db").write_bytes(b"x")
    assert database_folder(tmp, tmp_path / "no-shm") == tmp and list(tmp.iterdir()) == []


def shard(folder: Path, questions: list[str]) -> ShardSearch:
    """One shard of a view's files: a persona per question, three rows each, bge-small's 384 dimensions."""
    rng = np.random.default_rng(0)
    n = len(questions)
    ids = [f"t{i}" for i in range(4 * n)]
    vectors = rng.standard_normal((4 * n, 384)).astype(np.float32)
    pq.write_table(pa.table({"text_id": ids, "text": [f"user: text {i}" for i in range(4 * n)]}), folder / "texts.parquet")
    pq.write_table(pa.table({"text_id": ids, "embedding": pa.FixedSizeListArray.from_arrays(
        pa.array(vectors.ravel()), 384)}), folder / "embeddings.parquet")
    pq.write_table(pa.table({
        "question_id": [f"q{p}" for p in range(n)], "question": questions,
        "question_text_id": [f"t{4 * p + 3}" for p in range(n)],
        "row_keys": [[f"s{r}" for r in range(3)] for _ in range(n)],
        "row_sessions": [[f"s{r}" for r in range(3)] for _ in range(n)],
        "row_created_at": [["2023-01-01T00:00:00Z"] * 3 for _ in range(n)],
        "row_docs": [[f"s{r}" for r in range(3)] for _ in range(n)],
        "row_text_ids": [[f"t{4 * p + r}" for r in range(3)] for p in range(n)]}), folder / "rows.parquet")
    return ShardSearch(folder / "rows.parquet", folder / "texts.parquet", [folder / "embeddings.parquet"], 0, 1, 10, 10)


@pytest.mark.parametrize("fault, detail, error", [
    ("refuse", "persona q1: vipune-lane: injected refusal", "injected refusal"),  # vipune's own message
    ("crash", r"persona q1: vipune-lane: `.*` ended \(exit 1\) before answering", None),  # vipune said nothing
])
def test_a_persona_the_lane_fails_is_recorded_with_vipunes_message_as_a_field_and_no_exit_code(
        tmp_path, monkeypatch, fault, detail, error):
    """Under vipune.on_error: record the status file records what happened, vipune's own message
    (a refusal's) and its exit code (none: the lib lane runs no vipune process) as fields
    (core.failed_pair); the other personas are searched."""
    binary, lane = fake_build(tmp_path)
    fingerprint = tmp_path / "lane.json"
    sha = hashlib.sha256(binary.read_bytes()).hexdigest()
    fingerprint.write_text(json.dumps(lane_fingerprint(lane, {"id": "x", "version": "0.20.2", "sha256": sha}, 30)))
    monkeypatch.setenv("FAKE_LANE_FAULT", fault)
    monkeypatch.setenv("FAKE_LANE_FAULT_MATCH", "second")
    status = tmp_path / "status.json"
    run_vipune_lib(shard(tmp_path, ["the first one?", "the second one?", "the third one?"]), lane, fingerprint, 30,
                   "record", tmp_path / "tmp", tmp_path / "out.run", tmp_path / "semantic.run", status)
    failed = json.loads(status.read_text())["failed"]
    assert list(failed) == ["q1"] and set(failed["q1"]) == {"detail", "exit_code", "error"}
    assert re.fullmatch(detail, failed["q1"]["detail"].split(";")[0])
    assert (failed["q1"]["exit_code"], failed["q1"]["error"]) == (None, error)
    assert {line.split()[0] for line in (tmp_path / "out.run").read_text().splitlines()} == {"q0", "q2"}
