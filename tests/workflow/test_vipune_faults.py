"""A misbehaving vipune during a run, through the Snakemake CLI (issue 10's break-it session): a
contract violation is a recorded failure, not a score; a broken version call stops the run saying
what it printed; a changed build behind a wrapper searches again; a second run is refused at
once and a killed one leaves nothing behind."""

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from support.results import report
from support.scenarios import VIPUNE_SEARCHES, clone, make_workdir, set_config, snakemake, snakemake_command


@pytest.mark.parametrize("fault, words", [("repeat-id", "twice"), ("over-limit", "more than --limit 10")])
def test_a_contract_violation_is_a_recorded_failure_not_a_score(small, small_run, workflow_env, tmp_path, fault, words):
    victim = next(i for i in json.loads(Path(small[0]).read_text()) if not i["question_id"].endswith("_abs"))
    workdir = clone(small_run, tmp_path / "w", drop=VIPUNE_SEARCHES)
    set_config(workdir, vipune={"on_error": "record"})
    snakemake(
        workdir,
        "--cores",
        "2",
        env={**workflow_env, "FAKE_VIPUNE_FAULT": fault, "FAKE_VIPUNE_FAULT_MATCH": victim["question"]},
    )
    vipune = report(workdir)["retrievers"]["vipune"]
    assert list(vipune["failed"]) == [victim["question_id"]] and vipune["pairs"] == 4
    failure = vipune["failed"][victim["question_id"]]
    message = failure["detail"]
    assert words in message and "a contract violation" in message and "--no-touch --" in message
    assert failure["exit_code"] is None and failure["error"] is None  # vipune exited 0 and said nothing


@pytest.mark.parametrize(
    "fault, message",
    [
        ("version-garbage", r"did not print vipune's version JSON \(exit code 0 after"),
        ("version-fail", r"exit code 1 after .*cannot initialise"),
    ],
)
def test_a_broken_version_call_stops_the_run_saying_what_it_printed(small, workflow_env, tmp_path, fault, message):
    workdir = make_workdir(tmp_path / "w", *small)
    proc = snakemake(workdir, "-n", env={**workflow_env, "FAKE_VIPUNE_FAULT": fault}, check=False)
    assert proc.returncode != 0
    assert re.search(message, proc.stderr) and "MissingOutputException" not in proc.stderr + proc.stdout


def test_a_changed_file_behind_a_wrapper_and_a_forced_rerun_really_search_again(small_run, workflow_env, tmp_path):
    build = tmp_path / "build.txt"
    build.write_text("build 1")
    workdir = clone(small_run, tmp_path / "w")
    set_config(workdir, vipune={"fingerprint_files": [str(build)]})
    # The jobs that run the binary read the record of where those files are (vipune.binary
    # .wrapped_record): its planned_file job comes first in the DAG (it once raced preflight).
    dot = snakemake(workdir, "--dag", env=workflow_env).stdout
    labels = dict(re.findall(r'^\s*(\d+)\[label = "([^"]*)"', dot, re.M))
    record = {n for n, label in labels.items() if label.startswith("planned_file") and ".wrapped.json" in label}
    readers = {n for n, label in labels.items() if label.split("\\n")[0] in ("preflight", "search_vipune")}
    edges = set(re.findall(r"^\s*(\d+) -> (\d+)", dot, re.M))
    assert len(record) == 1 and readers, labels
    assert {(*record, reader) for reader in readers} <= edges
    snakemake(workdir, "--cores", "2", env=workflow_env)
    first = report(workdir)["provenance"]["vipune"]["id"]
    # Forced: the per-persona cache of a completed shard is not reused (a failing binary fails).
    proc = snakemake(
        workdir,
        "--cores",
        "2",
        "--forcerun",
        "search_vipune",
        env={**workflow_env, "FAKE_VIPUNE_FAULT": "error"},
        check=False,
    )
    assert proc.returncode != 0 and "injected" in proc.stdout + proc.stderr
    snakemake(workdir, "--cores", "2", env=workflow_env)
    build.write_text("build 2")  # the wrapper (the fake) is unchanged; the build behind it is not
    out = snakemake(workdir, "-n", "--cores", "1", env=workflow_env).stdout
    assert "search_vipune" in out and "preflight" in out
    snakemake(workdir, "--cores", "2", env=workflow_env)
    assert report(workdir)["provenance"]["vipune"]["id"] != first


def start(workdir, env):
    cmd = snakemake_command(workdir, "--cores", "2")
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def wait_for(condition, proc, seconds=120):
    deadline = time.monotonic() + seconds
    while not condition():
        assert proc.poll() is None, "the run ended too early"
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def test_a_second_run_is_refused_at_once_and_a_kill_9_leaves_no_lock_or_scratch(small_run, workflow_env, tmp_path):
    workdir = clone(small_run, tmp_path / "w", drop=VIPUNE_SEARCHES)
    first = start(workdir, {**workflow_env, "FAKE_VIPUNE_DELAY": "0.5"})
    wait_for(lambda: list((workdir / "results/tmp").glob("*search/*/*/persona-*")), first)
    began = time.monotonic()
    second = snakemake(workdir, "--cores", "2", env=workflow_env, check=False)
    assert second.returncode != 0 and time.monotonic() - began < 30
    assert f"another run (PID {first.pid}) is working in this directory" in second.stderr
    assert first.poll() is None  # the first run goes on, its outputs untouched
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert list((workdir / "results/tmp").iterdir())  # what the killed run left
    snakemake(workdir, "--cores", "2", env=workflow_env)  # no --unlock, no clean-up by hand
    assert not [p for p in (workdir / "results/tmp").rglob("*") if p.is_file() or p.name.startswith("persona-")]
    assert report(workdir)["pairs"] == 5
