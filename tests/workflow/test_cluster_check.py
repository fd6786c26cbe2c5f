"""The SLURM profile through the Snakemake CLI without a cluster: a dry run plans grouped jobs
with their resources, and the fit check stops an oversized run before submitting, with fake
SLURM tools on PATH (the check itself: tests/unit/plan/test_cluster.py). They need the SLURM
executor plugin (support.slurm.executor_env)."""

import os
import re

from support.scenarios import SNAKEFILE, make_workdir, snakemake
from support.slurm import executor_env, write_fake_slurm


def test_the_slurm_profile_stops_an_oversized_run_before_submitting(tmp_path, workflow_env, scenario_inputs):
    """Through the Snakemake CLI and the real profile, with fake SLURM tools on PATH."""
    workdir = make_workdir(tmp_path / "run", *scenario_inputs("standard"))
    calls = tmp_path / "sbatch-calls.txt"
    write_fake_slurm(tmp_path / "slurm-bin", calls)
    env = executor_env({**workflow_env, "PATH": f"{tmp_path / 'slurm-bin'}{os.pathsep}{workflow_env['PATH']}"})
    profile = SNAKEFILE.parent / "profiles/slurm"
    proc = snakemake(
        workdir,
        "--profile",
        str(profile),
        "--set-threads",
        "embed=8",
        "--set-resources",
        "filter_pairs:mem_mb=64000",
        env=env,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "rule embed (2 jobs) in partition 'debug': threads 8 > 2 CPUs; lower it with --set-threads embed=2" in out
    assert (
        "rule filter_pairs in partition 'debug': mem_mb 64000 > 24105 MB; lower it with "
        "--set-resources filter_pairs:mem_mb=24105" in out
    )
    assert not calls.exists()  # sbatch never called
    assert not (workdir / "results/filter").exists() and not (workdir / "results/model/vipune-home").exists()
    # The shipped defaults fit the same 2-CPU partition: the check passes and submission starts
    # (the fake sbatch then fails, naming the rule).
    proc = snakemake(workdir, "--profile", str(profile), env=env, check=False)
    out = proc.stdout + proc.stderr
    assert "ask for more than" not in out
    assert calls.exists() and "--cpus-per-task=1" in calls.read_text()
    assert re.search(r"Error in rule (filter|preflight)", out), out[-3000:]


def test_slurm_profile_dry_run_plans_grouped_jobs_with_resources(standard, workflow_env, tmp_path):
    workdir = make_workdir(tmp_path / "cluster", *standard)
    # A dry run caps threads at --cores (1 when not given): 64 shows the profile's own values.
    proc = snakemake(
        workdir,
        "--profile",
        str(SNAKEFILE.parent / "profiles/slurm"),
        "-n",
        "--cores",
        "64",
        env=executor_env(workflow_env),
    )
    out = proc.stdout
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", out[out.index("Job stats:") :], re.M))
    assert stats["search_vipune"] == "3" and stats["embed"] == "2" and stats["search_arms"] == "3"
    assert "Group job search-vipune" in out and "Group job search-arms" in out
    embed = out[out.index("rule embed:") :]
    embed = embed[: embed.index("Shell command")]
    assert "mem_mb=3500" in embed and "runtime=720" in embed
    # The defaults fit a 2-CPU node: no job asks for more than 2 threads.
    assert re.search(r"vipune-eval embed .*--threads 2", out)
    assert re.search(r"vipune-eval search-vipune .*--threads 1", out)
    assert max(int(t) for t in re.findall(r"^\s+threads: (\d+)$", out, re.M)) <= 2
