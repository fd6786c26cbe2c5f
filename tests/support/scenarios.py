"""Workflow scenarios: configs as files (tests/scenarios/*.yaml), inputs generated, runs shared.

A scenario file holds the generated dataset's parameters (``dataset``), the tiny model's
(``model``) and the workflow config (``config``); ``dataset.path`` and ``model.path`` are filled
in with the generated inputs. conftest.py runs each scenario at most once per test session
(``finished_run``) and tests that change a finished run work on a ``clone`` of it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from support import snakemake_fork
from support.synthetic import write_dataset
from support.tinymodel import build_tiny_model

REPO = Path(__file__).resolve().parents[2]
SNAKEFILE = REPO / "workflow" / "Snakefile"
SCENARIOS = REPO / "tests" / "scenarios"


def spec(name: str) -> dict[str, Any]:
    return yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text())


def write_inputs(name: str, folder: Path) -> tuple[Path, Path]:
    """The scenario's generated dataset and tiny model, written into ``folder``."""
    scenario = spec(name)
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "data.json"
    write_dataset(data, **scenario["dataset"])
    model = build_tiny_model(folder / "model", **scenario.get("model", {}))
    return data, model


def make_workdir(root: Path, data: Path, model: Path, scenario: str = "standard", **overrides: Any) -> Path:
    """A run folder holding the scenario's config on ``data`` and ``model``; each override
    replaces a top-level key, or updates it when both are mappings."""
    config = spec(scenario)["config"]
    config["dataset"] = {**config.get("dataset", {}), "path": str(data)}
    config["model"] = {**config.get("model", {}), "path": str(model)}
    for key, value in overrides.items():
        config[key] = {**config.get(key, {}), **value} if isinstance(value, dict) else value
    root.mkdir(parents=True)
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    return root


def set_config(workdir: Path, **overrides: Any) -> None:
    """Update top-level keys of ``workdir``'s config (mappings are merged)."""
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    for key, value in overrides.items():
        config[key] = {**config.get(key, {}), **value} if isinstance(value, dict) else value
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))


def snakemake_command(workdir: Path, *args: str, snakefile: Path = SNAKEFILE) -> list[str]:
    """Snakemake's command line on ``workdir`` and its config.yaml, ``args`` added (for a run the
    test starts itself, e.g. to stop it)."""
    return [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(snakefile),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
        *args,
    ]


def snakemake(
    workdir: Path,
    *args: str,
    env: dict[str, str],
    check: bool = True,
    snakefile: Path = SNAKEFILE,
    timeout: float | None = None,
    fresh: bool = False,
) -> subprocess.CompletedProcess:
    """The Snakemake CLI on ``workdir``'s config.yaml (the API's signatures move between minors),
    forked from a process that imported Snakemake already (support.snakemake_fork), or ``fresh``:
    a new ``python -m snakemake`` process (a hash seed of its own)."""
    cmd = snakemake_command(workdir, *args, snakefile=snakefile)
    proc = snakemake_fork.run(cmd, env=env, cwd=workdir.parent, timeout=timeout, fresh=fresh)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return proc


def write_config(workdir: Path, config: dict[str, Any]) -> None:
    """Replace ``workdir``'s config with ``config``."""
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))


def planned(workdir: Path, env: dict[str, str], *extra: str) -> dict[str, int]:
    """Rule → number of jobs a dry run would execute (empty when nothing is stale)."""
    return job_counts(snakemake(workdir, "-n", "--cores", "1", *extra, env=env).stdout)


def job_counts(out: str) -> dict[str, int]:
    """Rule → number of jobs, from a dry run's output (empty when nothing is stale)."""
    if "Nothing to be done" in out:
        return {}
    table = out[out.index("Job stats:") : out.index("total")]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def clone(workdir: Path, dest: Path, drop: tuple[str, ...] = ()) -> Path:
    """A copy of a finished run (config, results and Snakemake's metadata, mtimes kept): a
    Snakemake run in it has nothing to do until the test changes something. ``drop``: globs
    (relative to ``dest``) of outputs to delete, so that their jobs run again."""
    shutil.copytree(workdir, dest, symlinks=True, ignore=shutil.ignore_patterns(".lock", "tmp"))
    for pattern in drop:
        for path in dest.glob(pattern):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    return dest


# The retrievers of a scenario that names none (the full and the real one).
RETRIEVERS = {
    "vipune",
    "vipune-semantic",
    "vipune-lib",
    "vipune-lib-semantic",
    "dense",
    "bm25",
    "bm25-or",
    "hybrid",
    "hybrid-or",
}

# What a clone drops so that both lanes search again (the rest of the run is kept).
VIPUNE_SEARCHES = (
    "results/search/vipune-*",
    "results/runs/vipune-*",
    "results/metrics/vipune-*",
    "results/report.json",
)
