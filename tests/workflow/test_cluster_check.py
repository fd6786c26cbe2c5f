"""The cluster fit check through the Snakemake CLI and the real SLURM profile, with fake SLURM
tools on PATH (the check itself: tests/unit/plan/test_cluster.py)."""

import os
import re

from support.scenarios import SNAKEFILE, make_workdir, snakemake
from support.slurm import write_fake_slurm


def test_the_slurm_profile_stops_an_oversized_run_before_submitting(tmp_path, workflow_env, scenario_inputs):
    """Through the Snakemake CLI and the real profile, with fake SLURM tools on PATH."""
    workdir = make_workdir(tmp_path / "run", *scenario_inputs("standard"))
    calls = tmp_path / "sbatch-calls.txt"
    write_fake_slurm(tmp_path / "slurm-bin", calls)
    env = {**workflow_env, "PATH": f"{tmp_path / 'slurm-bin'}{os.pathsep}{workflow_env['PATH']}"}
    profile = SNAKEFILE.parent / "workflow/profiles/slurm"
    proc = snakemake(workdir, "--profile", str(profile), "--set-threads", "embed=8",
                     "--set-resources", "filter:mem_mb=64000", env=env, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "rule embed (2 jobs) in partition 'debug': threads 8 > 2 CPUs; lower it with " \
           "--set-threads embed=2" in out
    assert "rule filter in partition 'debug': mem_mb 64000 > 24105 MB; lower it with " \
           "--set-resources filter:mem_mb=24105" in out
    assert not calls.exists()  # sbatch never called
    assert not (workdir / "results/filter").exists() and not (workdir / "results/model/vipune-home").exists()
    # The shipped defaults fit the same 2-CPU partition: the check passes and submission starts
    # (the fake sbatch then fails, naming the rule).
    proc = snakemake(workdir, "--profile", str(profile), env=env, check=False)
    out = proc.stdout + proc.stderr
    assert "ask for more than" not in out
    assert calls.exists() and "--cpus-per-task=1" in calls.read_text()
    assert re.search(r"Error in rule (filter|preflight)", out), out[-3000:]
