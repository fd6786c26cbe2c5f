"""Through the Snakemake CLI: kill -9 and resume, determinism (the failure policies:
test_failure_policy.py; the cluster profile: test_cluster_check.py)."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from support.results import metrics, run_files
from support.scenarios import VIPUNE_SEARCHES, clone, make_workdir, snakemake, snakemake_command

pytestmark = pytest.mark.slow


def test_two_cold_runs_are_byte_identical(standard_run, standard, workflow_env, tmp_path):
    """The shared run came from a forked Snakemake (support.snakemake_fork); this one is a fresh
    process, so the two have different hash seeds (set orders)."""
    other = make_workdir(tmp_path / "again", *standard)
    snakemake(other, "--cores", "2", env=workflow_env, fresh=True)
    assert run_files(other) == run_files(standard_run)
    assert len(run_files(other)) == 9  # seven retrievers and the lib lane's two
    assert metrics(other) == metrics(standard_run)


def start_then_kill(workdir, env, trigger, *args):
    """Start a run (Snakemake's ``args`` added), SIGKILL its whole process group as soon as
    ``trigger()`` holds."""
    cmd = snakemake_command(workdir, "--cores", "2", *args)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not trigger():
        assert proc.poll() is None, "the run ended before the kill point"
        assert time.monotonic() < deadline, "the kill point never came"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.mark.parametrize("stage", ["embed", "search"])
def test_kill_9_then_rerun_completes_with_identical_results(standard_run, standard, workflow_env, tmp_path, stage):
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


def ram_folders_of(workdir: Path) -> set[Path]:
    """The lib lane's folders in /dev/shm that jobs of ``workdir`` made (their .job file)."""
    found = set()
    for folder in Path("/dev/shm").glob("vipune-lib-*"):
        try:
            if str(workdir.resolve()) in (folder / ".job").read_text():
                found.add(folder)
        except OSError:
            pass
    return found


def processes_naming(paths: set[Path]) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().decode(errors="replace")
        except OSError:
            continue
        found += [args for path in paths if str(path) in args]
    return found


@pytest.mark.skipif(
    not Path("/dev/shm").is_dir(), reason="no /dev/shm: the vipune-lane's databases are not in RAM here"
)
def test_a_rerun_after_a_kill_during_a_forced_lib_search_makes_every_shard_and_leaves_no_lane(
    standard_run, workflow_env, tmp_path
):
    """Issue 44 item 4: a killed --forcerun search_vipune_lib had deleted the shards of the jobs
    it started, and a plain rerun said "Nothing to be done" over the old report (Snakemake
    remakes no missing intermediate whose readers are up to date: rule all names the shards
    now); the lanes (in sessions of their own) outlived the kill, and their /dev/shm folders (a
    job killed after making its folder and before starting its vipune-lane, too: CI's stop 46)."""
    workdir = clone(standard_run, tmp_path / "killed")
    shards = sorted((workdir / "results/search").glob("vipune-lib-*/shard-*"))
    env = {**workflow_env, "FAKE_LANE_FAULT": "hang", "FAKE_LANE_FAULT_MATCH": ""}  # every lane hangs
    seen: set[Path] = set()

    def trigger():  # a lane runs (its folder guarded by the job's watchdog before it starts)
        seen.update(ram_folders_of(workdir))
        return any("\0--tmp\0" in args for args in processes_naming(seen))

    start_then_kill(workdir, env, trigger, "--forcerun", "search_vipune_lib")
    assert set(sorted((workdir / "results/search").glob("vipune-lib-*/shard-*"))) < set(shards)  # deleted
    deadline = time.monotonic() + 10
    while (processes_naming(seen) or any(f.exists() for f in seen)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_naming(seen) == [], "a lane outlived the killed run"
    assert not any(f.exists() for f in seen), "a lane's databases stayed in /dev/shm"
    snakemake(workdir, "--cores", "2", env=workflow_env)
    assert ram_folders_of(workdir) == set()
    assert sorted((workdir / "results/search").glob("vipune-lib-*/shard-*")) == shards
    assert run_files(workdir) == run_files(standard_run)
    assert metrics(workdir) == metrics(standard_run)


def test_a_sigterm_to_the_run_is_summarised_as_a_stop_and_a_rerun_goes_on(small_run, workflow_env, tmp_path):
    """Issue 51 item 6: a SIGTERM to the run's process group (Ctrl-C, a cluster's stop) was
    summarised as "2 job(s) failed or cannot run", each quoting the last INFO line of its log."""
    workdir = clone(small_run, tmp_path / "stopped", drop=VIPUNE_SEARCHES)
    cmd = snakemake_command(workdir, "--cores", "2")
    with open(tmp_path / "stderr", "w") as err:
        proc = subprocess.Popen(
            cmd,
            env={**workflow_env, "FAKE_VIPUNE_DELAY": "0.5"},
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while not list((workdir / "results/search").glob("vipune-*/cache/[0-9a-f]*.json")):
            assert proc.poll() is None and time.monotonic() < deadline, "no persona was searched"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGTERM)  # mid-shard: each vipune call takes 0.5 s
        proc.wait(timeout=120)
    lines = (tmp_path / "stderr").read_text().splitlines()
    assert proc.returncode != 0
    assert "job(s) failed" not in "\n".join(lines) and " INFO " not in "\n".join(lines[-2:])
    assert lines[-2].startswith("vipune-eval: the run was stopped (SIGTERM) before it finished; ") and (
        "search_vipune" in lines[-2]
    )
    assert lines[-1] == "vipune-eval: fix: run the same command again to go on: every finished job is kept"
    snakemake(workdir, "--cores", "2", env=workflow_env)
    assert metrics(workdir) == metrics(small_run)
