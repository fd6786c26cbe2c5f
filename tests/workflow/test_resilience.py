"""Through the Snakemake CLI: failure policy, kill -9 and resume, determinism, cluster profile."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.scenarios import SNAKEFILE, VIPUNE_SEARCHES, clone, make_workdir, set_config, snakemake

REPO = SNAKEFILE.parent


pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def inputs(scenario_inputs):
    return scenario_inputs("standard")


def run_files(workdir):
    return {p.name: p.read_bytes() for p in sorted((workdir / "results/runs").glob("*.run"))}


def metrics(workdir):
    report = json.loads((workdir / "results/report.json").read_text())
    return {name: entry["metrics"] for name, entry in report["retrievers"].items()}


@pytest.fixture(scope="module")
def reference_run(finished_run):
    return finished_run("standard")[0]


def first_question(data, index=0):
    return next(i for i in json.loads(Path(data).read_text()) if not i["question_id"].endswith("_abs"))


def test_two_cold_runs_are_byte_identical(reference_run, inputs, workflow_env, tmp_path):
    other = make_workdir(tmp_path / "again", *inputs)
    snakemake(other, "--cores", "2", env=workflow_env)
    assert run_files(other) == run_files(reference_run)
    assert len(run_files(other)) == 7
    assert metrics(other) == metrics(reference_run)


def start_then_kill(workdir, env, trigger):
    """Start a run, SIGKILL its whole process group as soon as ``trigger()`` holds."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "--directory", str(workdir),
           "--configfile", str(workdir / "config.yaml"), "--cores", "2"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while not trigger():
        assert proc.poll() is None, "the run ended before the kill point"
        assert time.monotonic() < deadline, "the kill point never came"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.mark.parametrize("stage", ["embed", "search"])
def test_kill_9_then_rerun_completes_with_identical_results(reference_run, inputs, workflow_env,
                                                            tmp_path, stage):
    env = {**workflow_env, "FAKE_VIPUNE_DELAY": "0.3"}
    if stage == "embed":
        workdir = make_workdir(tmp_path / "killed", *inputs)

        def trigger():
            return (workdir / "results/logs/embed").exists() and not list((workdir / "results/embed").glob("*.parquet"))
    else:  # the searches of a finished run, again
        workdir = clone(reference_run, tmp_path / "killed", drop=VIPUNE_SEARCHES)

        def trigger():
            return len(list((workdir / "results/search").glob("vipune-*/cache/[0-9a-f]*.json"))) >= 2
    start_then_kill(workdir, env, trigger)
    assert not (workdir / "results/report.json").exists()
    snakemake(workdir, "--cores", "2", env=workflow_env)  # no --unlock, no clean-up by hand
    assert run_files(workdir) == run_files(reference_run)
    assert metrics(workdir) == metrics(reference_run)


def test_record_policy_reports_failed_pairs_apart(inputs, workflow_env, tmp_path, reference_run):
    data, _ = inputs
    victim = first_question(data)
    workdir = clone(reference_run, tmp_path / "record", drop=VIPUNE_SEARCHES)
    set_config(workdir, vipune={"on_error": "record"})
    env = {**workflow_env, "FAKE_VIPUNE_FAULT": "crash", "FAKE_VIPUNE_FAULT_MATCH": victim["question"]}
    snakemake(workdir, "--cores", "2", env=env)
    report = json.loads((workdir / "results/report.json").read_text())
    vipune = report["retrievers"]["vipune"]
    assert list(vipune["failed"]) == [victim["question_id"]]
    assert "killed by signal 9" in vipune["failed"][victim["question_id"]]
    assert vipune["pairs"] == report["pairs"] - 1 and report["retrievers"]["dense"]["pairs"] == report["pairs"]
    # The failed pair is left out of the average, not scored as 0: the mean over the other pairs.
    reference = json.loads(next(p for p in (reference_run / "results/metrics").glob("vipune-*.json")
                                   if not p.stem.endswith("-semantic")).read_text())
    others = [row["recall@5"] for qid, row in reference["per_query"].items() if qid != victim["question_id"]]
    assert vipune["metrics"]["recall@5"] == pytest.approx(sum(others) / len(others))


def test_stop_policy_names_the_persona_and_a_rerun_redoes_only_what_failed(inputs, workflow_env, tmp_path,
                                                                           reference_run):
    data, _ = inputs
    victim = first_question(data)
    workdir = clone(reference_run, tmp_path / "stop", drop=VIPUNE_SEARCHES)
    env = {**workflow_env, "FAKE_VIPUNE_FAULT": "error", "FAKE_VIPUNE_FAULT_MATCH": victim["question"]}
    proc = snakemake(workdir, "--cores", "2", "--keep-going", env=env, check=False)
    assert proc.returncode != 0
    log = "\n".join(p.read_text() for p in (workdir / "results/logs/search_vipune").rglob("*.log"))
    assert f"persona {victim['question_id']}" in log and "injected" in log and "--no-touch --" in log
    finished = sorted(p for p in (workdir / "results/search").glob("vipune-*/shard-*.run")
                      if not p.parent.name.endswith("-semantic"))
    assert len(finished) == 2  # the other shards are kept
    stamps = {p: p.stat().st_mtime_ns for p in finished}
    cached = len(list((workdir / "results/search").glob("vipune-*/cache/[0-9a-f]*.json")))
    assert cached == 8  # the personas of the finished shards; the failing shard stopped at once
    snakemake(workdir, "--cores", "2", env=workflow_env)
    assert {p: p.stat().st_mtime_ns for p in finished} == stamps
    assert run_files(workdir) == run_files(reference_run)


def test_bad_dataset_stops_the_run_naming_file_and_question(inputs, workflow_env, tmp_path):
    _, model = inputs
    bad = tmp_path / "bad.json"
    rows = json.loads(Path(inputs[0]).read_text())
    rows[3]["haystack_session_ids"] = rows[3]["haystack_session_ids"][:-1]
    bad.write_text(json.dumps(rows))
    workdir = make_workdir(tmp_path / "bad", bad, model)
    proc = snakemake(workdir, "--cores", "1", env=workflow_env, check=False)
    assert proc.returncode != 0
    log = "\n".join(p.read_text() for p in (workdir / "results/logs").glob("filter*.log"))
    assert str(bad) in log and rows[3]["question_id"] in log and "haystack_session_ids" in log
    assert not (workdir / "results/filter").exists() or not list((workdir / "results/filter").iterdir())


def test_slurm_profile_dry_run_plans_grouped_jobs_with_resources(inputs, workflow_env, tmp_path):
    workdir = make_workdir(tmp_path / "cluster", *inputs)
    # A dry run caps threads at --cores (1 when not given): 64 shows the profile's own values.
    proc = snakemake(workdir, "--profile", str(REPO / "workflow/profiles/slurm"), "-n", "--cores", "64",
                     env=workflow_env)
    out = proc.stdout
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", out[out.index("Job stats:"):], re.M))
    assert stats["search_vipune"] == "3" and stats["embed"] == "2" and stats["search_reference"] == "3"
    assert "Group job search-vipune" in out and "Group job search-reference" in out
    embed = out[out.index("rule embed:"):]
    embed = embed[:embed.index("Shell command")]
    assert "mem_mb=3500" in embed and "runtime=720" in embed
    # The defaults fit a 2-CPU node: no job asks for more than 2 threads.
    assert re.search(r"vipune-eval embed .*--threads 2", out)
    assert re.search(r"vipune-eval search-vipune .*--threads 1", out)
    assert max(int(t) for t in re.findall(r"^\s+threads: (\d+)$", out, re.M)) <= 2
