"""Bracketing (issue 12): a persona of more than 10,000 rows stays in one vipune database, no
call asks for more than vipune's MAX_SEARCH_LIMIT, and both lanes rank it (the binary agrees
with its mirrors)."""

import json

import pyarrow.parquet as pq
import pytest

from support.results import read_run
from support.scenarios import make_workdir, snakemake
from support.synthetic import write_dataset
from support.tinymodel import build_tiny_model


@pytest.mark.slow
def test_a_persona_over_10000_rows_runs_in_both_lanes(tmp_path, workflow_env):
    data = tmp_path / "data.json"
    write_dataset(
        data,
        instances=2,
        abstention=0,
        sessions_per_haystack=105,
        filler_pool=110,
        turns_per_session=100,
        words_per_turn=4,
        seed=9,
    )
    model = build_tiny_model(tmp_path / "model")
    workdir = make_workdir(
        tmp_path / "w",
        data,
        model,
        granularities=["session", "turn"],
        search={"shards": 1, "threads": 2, "row_limit": 2000},
        embed={"shards": 1, "threads": 2, "batch_tokens": 8192},
    )
    snakemake(workdir, "--cores", "2", env=workflow_env)
    rows = pq.read_table(workdir / "results/turn/filter/rows.parquet", columns=["row_keys"]).column("row_keys")
    assert min(len(r) for r in rows.to_pylist()) > 10_000
    log = (workdir / "results/logs/turn/search_vipune").rglob("*.log")
    assert next(log).read_text().count("failed") == 0
    report = json.loads((workdir / "results/report.json").read_text())
    turn = report["views"]["turn"]["retrievers"]
    runs = {name: read_run(workdir / entry["run"]) for name, entry in turn.items()}
    assert runs["vipune"] == runs["hybrid"] and runs["vipune-semantic"] == runs["dense"]
    assert all(len(docs) == 10 for docs in runs["vipune"].values())  # ten distinct sessions
    assert turn["vipune"]["pairs"] == 2 and not turn["vipune"]["failed"]
