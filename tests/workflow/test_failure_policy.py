"""A failing persona or dataset through the Snakemake CLI: vipune.on_error record reports the
failed pairs apart (a question vipune refuses named in the report's first lines), stop names the
persona and a rerun redoes only what failed, and a bad dataset stops the run naming the file and
the question."""

import json
import re
from pathlib import Path

import pytest

from support.results import run_files
from support.scenarios import VIPUNE_SEARCHES, clone, make_workdir, set_config, snakemake


def first_question(data, index=0):
    return next(i for i in json.loads(Path(data).read_text()) if not i["question_id"].endswith("_abs"))


def test_record_policy_reports_failed_pairs_apart(standard, workflow_env, tmp_path, standard_run):
    data, _ = standard
    victim = first_question(data)
    workdir = clone(standard_run, tmp_path / "record", drop=VIPUNE_SEARCHES)
    set_config(workdir, vipune={"on_error": "record"})
    env = {**workflow_env, "FAKE_VIPUNE_FAULT": "crash", "FAKE_VIPUNE_FAULT_MATCH": victim["question"]}
    snakemake(workdir, "--cores", "2", env=env)
    report = json.loads((workdir / "results/report.json").read_text())
    vipune = report["retrievers"]["vipune"]
    assert list(vipune["failed"]) == [victim["question_id"]]
    failure = vipune["failed"][victim["question_id"]]
    assert "killed by signal 9" in failure["detail"] and failure["exit_code"] is None  # killed: no exit code
    assert vipune["pairs"] == report["pairs"] - 1 and report["retrievers"]["dense"]["pairs"] == report["pairs"]
    # The failed pair is left out of the average, not scored as 0: the mean over the other pairs.
    reference = json.loads(
        next(
            p for p in (standard_run / "results/metrics").glob("vipune-*.json") if not p.stem.endswith("-semantic")
        ).read_text()
    )
    others = [row["recall@5"] for qid, row in reference["per_query"].items() if qid != victim["question_id"]]
    assert vipune["metrics"]["recall@5"] == pytest.approx(sum(others) / len(others))


def test_stop_policy_names_the_persona_and_a_rerun_redoes_only_what_failed(
    standard, workflow_env, tmp_path, standard_run
):
    data, _ = standard
    victim = first_question(data)
    workdir = clone(standard_run, tmp_path / "stop", drop=VIPUNE_SEARCHES)
    env = {**workflow_env, "FAKE_VIPUNE_FAULT": "error", "FAKE_VIPUNE_FAULT_MATCH": victim["question"]}
    proc = snakemake(workdir, "--cores", "2", "--keep-going", env=env, check=False)
    assert proc.returncode != 0
    log = "\n".join(p.read_text() for p in (workdir / "results/logs/search_vipune").rglob("*.log"))
    assert f"persona {victim['question_id']}" in log and "injected" in log and "--no-touch --" in log
    finished = sorted(
        p
        for p in (workdir / "results/search").glob("vipune-*/shard-*.run")
        if not p.parent.name.endswith("-semantic") and not p.parent.name.startswith("vipune-lib-")
    )
    assert len(finished) == 2  # the other shards are kept
    stamps = {p: p.stat().st_mtime_ns for p in finished}
    cached = len(list((workdir / "results/search").glob("vipune-*/cache/[0-9a-f]*.json")))
    assert cached == 8  # the personas of the finished shards; the failing shard stopped at once
    snakemake(workdir, "--cores", "2", env=workflow_env)
    assert {p: p.stat().st_mtime_ns for p in finished} == stamps
    assert run_files(workdir) == run_files(standard_run)


def test_bad_dataset_stops_the_run_naming_file_and_question(standard, workflow_env, tmp_path):
    _, model = standard
    bad = tmp_path / "bad.json"
    rows = json.loads(Path(standard[0]).read_text())
    rows[3]["haystack_session_ids"] = rows[3]["haystack_session_ids"][:-1]
    bad.write_text(json.dumps(rows))
    workdir = make_workdir(tmp_path / "bad", bad, model)
    proc = snakemake(workdir, "--cores", "1", env=workflow_env, check=False)
    assert proc.returncode != 0
    log = "\n".join(p.read_text() for p in (workdir / "results/logs").glob("filter*.log"))
    assert str(bad) in log and rows[3]["question_id"] in log and "haystack_session_ids" in log
    assert not (workdir / "results/filter").exists() or not list((workdir / "results/filter").iterdir())


def test_a_question_vipune_refuses_is_named_in_the_first_lines(tmp_path, workflow_env, scenario_inputs):
    """Issue 38: a question over 512 tokens, which vipune's search refuses (exit 3). With
    vipune.on_error: stop its shard fails naming the persona and the way on; with record the run
    ends, and the summary's and report.md's first lines name the pair and why
    (docs/troubleshooting.md)."""
    data, model = scenario_inputs("small")
    rows = json.loads(data.read_text())
    victim = next(r for r in rows if not r["question_id"].endswith("_abs"))
    victim["question"] += " " + " ".join(["again"] * 600)
    long = tmp_path / "long.json"
    long.write_text(json.dumps(rows))
    workdir = make_workdir(tmp_path / "w", long, model, scenario="small")
    stopped = snakemake(workdir, "--cores", "2", env=workflow_env, check=False)
    out = stopped.stdout + stopped.stderr
    assert stopped.returncode != 0
    assert f"persona {victim['question_id']}: " in out  # by whichever lane met it first, with the exit code
    assert re.search(r"(exited 3|`vipune search` exits 3 on it\)): content exceeds 512-token", out)
    assert "set vipune.on_error: record to score the other pairs anyway" in out
    set_config(workdir, vipune={"on_error": "record"})
    snakemake(workdir, "--cores", "2", env=workflow_env)
    summary = (workdir / "results/summary.txt").read_text().splitlines()
    report = json.loads((workdir / "results/report.json").read_text())
    failure = report["retrievers"]["vipune"]["failed"][victim["question_id"]]  # issue 43.4: vipune's own words
    assert failure["exit_code"] == 3 and failure["error"].startswith("content exceeds 512-token embedding limit")
    # both lanes refuse it (issue 43.4), in vipune's words and with the binary's exit code: one line
    # names them all, and the lanes scored the same pairs
    assert report["retrievers"]["vipune-lib"]["failed"][victim["question_id"]] == {
        **failure,
        "detail": report["retrievers"]["vipune-lib"]["failed"][victim["question_id"]]["detail"],
    }
    named = (
        f"vipune, vipune-semantic, vipune-lib and vipune-lib-semantic: 1 pair failed and is left out of every "
        f'average (vipune.on_error: record; report.json lists why); vipune exited 3 saying "{failure["error"]}": '
        f"{victim['question_id']}"
    )
    warnings = summary.index("warnings:")
    assert warnings < 8 and summary[warnings + 1] == f"  ! {named}"  # after the builds, the model and the data
    md = (workdir / "results/report.md").read_text().splitlines()
    assert md.index(f"- {named}") < 12
    assert not any("their averages are over different pairs" in line for line in summary)
    lanes = ("vipune", "vipune-semantic", "vipune-lib", "vipune-lib-semantic")
    assert {report["retrievers"][name]["pairs"] for name in lanes} == {report["pairs"] - 1}
