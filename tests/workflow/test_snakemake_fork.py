"""support.snakemake_fork against the real thing: a command forked from the server prints and
exits as the same command in a fresh `python -m snakemake` process."""

import re
import shutil
import subprocess
import sys
import time

import pytest

from support import snakemake_fork
from support.scenarios import REPO, job_counts

pytestmark = pytest.mark.slow

# What differs between any two runs: the date, the workflow's id, the log's file name, timings;
# and, as the hash seed orders sets, the order of the files a job's reason names and of the jobs
# a dry run lists with the same priority (so of their ids).
VARYING = re.compile(r"\d{4}-\d\d-\d\d[T ]?|\d\d:\d\d:\d\d[.\d]*|[0-9a-f]{8}-[0-9a-f-]{27}|Elapsed time: [\d:.]+")


SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def both(args, env, cwd):
    cmd = [*SNAKEMAKE, *args]
    fresh = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    return fresh, snakemake_fork.run(cmd, env=env, cwd=cwd)


def same_text(a: str) -> list[str]:
    """The output's lines, sorted, without what varies (a job's id is its place in that order)."""
    lines = VARYING.sub("…", a).splitlines()
    return sorted(
        " ".join(sorted(re.split(r"[\s,;]+", line))) if "reason:" in line else line
        for line in lines
        if "jobid:" not in line
    )


@pytest.mark.parametrize(
    "extra",
    [
        ["-n"],  # the plan
        ["-n", "--config", "search={'shards': 0}"],  # refused by the config's schema: exit 1 and why
        ["--list-rules"],
    ],
    ids=["dry run", "bad config", "list rules"],
)
def test_the_test_scenario_prints_and_exits_as_a_fresh_process(extra, workflow_env, tmp_path):
    workdir = shutil.copytree(REPO / ".test", tmp_path / "scenario")
    fresh, forked = both(
        ["-s", str(REPO / "workflow/Snakefile"), "--directory", str(workdir), *extra], workflow_env, tmp_path
    )
    assert forked.returncode == fresh.returncode
    assert same_text(forked.stdout) == same_text(fresh.stdout)
    assert same_text(forked.stderr) == same_text(fresh.stderr)
    if extra == ["-n"]:
        assert job_counts(forked.stdout)["embed"] == 2  # a real plan, not an empty output
    elif "--config" in extra:
        assert fresh.returncode == 1 and "shards" in fresh.stderr


SNAKEFILE = """
import os, sys
print("argv0", sys.argv[0], "path0", sys.path[0], "cwd", os.getcwd(), "env", os.environ.get("FORK_PROBE"))
print("pythonpath", os.environ.get("FORK_EXTRA") in sys.path)
rule all:
    output: "out.txt"
    shell: "echo $FORK_PROBE > {output}"
"""


def test_argv_path_environment_and_working_directory_are_the_commands(workflow_env, tmp_path):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    env = {**workflow_env, "FORK_PROBE": "from the test"}
    fresh, forked = both(["--cores", "1", "-q"], env, tmp_path)
    assert "argv0" in fresh.stdout and forked.stdout == fresh.stdout
    assert f"cwd {tmp_path} env from the test" in forked.stdout and "pythonpath False" in forked.stdout
    # a PYTHONPATH of the command's own (the SLURM executor plugin's) is on its sys.path
    extra = tmp_path / "extra"
    fresh, forked = both(["--cores", "1", "-q"], {**env, "FORK_EXTRA": str(extra), "PYTHONPATH": str(extra)}, tmp_path)
    assert "pythonpath True" in fresh.stdout and forked.stdout == fresh.stdout
    assert (tmp_path / "out.txt").read_text() == "from the test\n"
    assert forked.returncode == fresh.returncode == 0


def test_a_command_past_its_timeout_is_killed_and_raises_as_subprocess_does(workflow_env, tmp_path):
    (tmp_path / "Snakefile").write_text('rule all:\n    shell: "sleep 3"\n')
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        snakemake_fork.run([*SNAKEMAKE, "--cores", "1"], env=workflow_env, cwd=tmp_path, timeout=1)
    assert time.monotonic() - start < 3
    assert (
        snakemake_fork.run([*SNAKEMAKE, "--version"], env=workflow_env, cwd=tmp_path).returncode == 0
    )  # the server goes on
