"""SLURM without a cluster: what this repository's CI node reports, and stand-ins for its tools;
and the SLURM executor plugin for a run through the profile."""

import importlib.util
import os
from pathlib import Path

import pytest

EXECUTOR = "VIPUNE_EVAL_SLURM_EXECUTOR"  # a folder holding the plugin: .ci/slurm/executor.sh

# What this repository's CI node reports (sinfo -h -N -p debug -o '%N|%c|%m'; scontrol -o).
NODES = "vm|2|24105\n"
SCONTROL = (
    "PartitionName=debug AllowGroups=ALL Default=YES MaxNodes=UNLIMITED MaxTime=UNLIMITED "
    "MinNodes=0 MaxCPUsPerNode=UNLIMITED Nodes=vm State=UP TotalCPUs=2 TotalNodes=1 "
    "DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED TRES=cpu=2,mem=24105M,node=1\n"
)


def write_fake_slurm(bin_dir, calls):
    """sinfo/scontrol/sacct/squeue/sbatch stand-ins: a 2-CPU partition; sbatch records calls."""
    bin_dir.mkdir()
    scripts = {
        "sinfo": 'case "$*" in *"-N -p debug"*) echo "vm|2|24105";; *) echo "debug*";; esac',
        "scontrol": f'case "$*" in *partition*) echo "{SCONTROL.strip()}";; *) echo "MinJobAge = 300 sec";; esac',
        "sacct": "exit 0",
        "squeue": "exit 0",
        "sbatch": f'echo "$*" >> {calls}; exit 1',
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)


def executor_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a Snakemake run through workflow/profiles/slurm: the executor plugin from this
    venv (the slurm extra) or, first on PYTHONPATH (sbatch passes it on to the jobs), from the folder
    in VIPUNE_EVAL_SLURM_EXECUTOR. Without either the test is skipped, saying so (failed where
    VIPUNE_EVAL_SLURM=required, as .ci/run sets it)."""
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is not None:
        return env
    folder = os.environ.get(EXECUTOR, "")
    if folder and (Path(folder) / "snakemake_executor_plugin_slurm").is_dir():
        return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [folder, env.get("PYTHONPATH")]))}
    why = (
        f"no SLURM executor plugin: install the slurm extra (pip install -e '.[test,slurm]') or name "
        f"a folder holding it in {EXECUTOR} (.ci/slurm/executor.sh FOLDER installs one)"
        + (f"; {EXECUTOR}={folder} holds none" if folder else "")
    )
    if os.environ.get("VIPUNE_EVAL_SLURM") == "required":
        pytest.fail(f"{why}; VIPUNE_EVAL_SLURM=required", pytrace=False)
    pytest.skip(why)
