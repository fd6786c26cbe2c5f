"""Through the Snakemake CLI: kill -9 and resume, determinism (the failure policies:
test_failure_policy.py; the cluster profile: test_cluster_check.py)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from support.results import metrics, run_files
from support.scenarios import SNAKEFILE, VIPUNE_SEARCHES, clone, make_workdir, snakemake

pytestmark = pytest.mark.slow


def test_two_cold_runs_are_byte_identical(standard_run, standard, workflow_env, tmp_path):
    other = make_workdir(tmp_path / "again", *standard)
    snakemake(other, "--cores", "2", env=workflow_env)
    assert run_files(other) == run_files(standard_run)
    assert len(run_files(other)) == 9  # seven retrievers and the lib lane's two
    assert metrics(other) == metrics(standard_run)


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
def test_kill_9_then_rerun_completes_with_identical_results(standard_run, standard, workflow_env,
                                                            tmp_path, stage):
    env = {**workflow_env, "FAKE_VIPUNE_DELAY": "0.3"}
    if stage == "embed":
        workdir = make_workdir(tmp_path / "killed", *standard)

        def trigger():
            return (workdir / "results/logs/embed").exists() and not list((workdir / "results/embed").glob("*.parquet"))
    else:  # the searches of a finished run, again
        workdir = clone(standard_run, tmp_path / "killed", drop=VIPUNE_SEARCHES)

        def trigger():
            return len(list((workdir / "results/search").glob("vipune-*/cache/[0-9a-f]*.json"))) >= 2
    start_then_kill(workdir, env, trigger)
    assert not (workdir / "results/report.json").exists()
    snakemake(workdir, "--cores", "2", env=workflow_env)  # no --unlock, no clean-up by hand
    assert run_files(workdir) == run_files(standard_run)
    assert metrics(workdir) == metrics(standard_run)
