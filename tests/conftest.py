"""Shared pytest fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from vipune_eval.sources import build_vipune_hf_home
from support import scenarios
from support.tinymodel import build_tiny_model

# Tests never touch the network: hub look-ups fail at once instead of retrying for ~40 s.
os.environ["HF_HUB_OFFLINE"] = "1"

FAKE_VIPUNE = Path(__file__).resolve().parent / "fake_vipune.py"
BGE_REPO_ID = "BAAI/bge-small-en-v1.5"
BGE_REVISION = "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"


@pytest.fixture(scope="session")
def fake_vipune_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``vipune`` executable (shell wrapper around tests/fake_vipune.py).

    Put ``fake_vipune_bin.parent`` first on PATH to stand it in for the real binary.
    """
    wrapper = tmp_path_factory.mktemp("fake-vipune-bin") / "vipune"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_VIPUNE}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


@pytest.fixture(scope="session")
def vipune_tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny test model (default vocabulary, seed 0) the fake vipune embeds with."""
    return build_tiny_model(tmp_path_factory.mktemp("vipune-tiny-model"))


@pytest.fixture
def vipune_hf_home(tmp_path: Path, vipune_tiny_model_dir: Path) -> Path:
    """An ``HF_HOME`` holding the tiny model where vipune looks for bge-small-en-v1.5."""
    return build_vipune_hf_home(vipune_tiny_model_dir, "model.onnx", BGE_REPO_ID, BGE_REVISION,
                                tmp_path / "hf_home")


@pytest.fixture(scope="session")
def workflow_env(fake_vipune_bin: Path) -> dict[str, str]:
    """Environment of a workflow run: the fake vipune and this venv's scripts on PATH, offline."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(fake_vipune_bin.parent), str(Path(sys.executable).parent),
                                   env.get("PATH", "")])
    env["HF_HUB_OFFLINE"] = "1"
    return env


@pytest.fixture(scope="session")
def scenario_inputs(tmp_path_factory: pytest.TempPathFactory):
    """``get(name)`` → the (dataset, model) of scenario ``name``, generated once per session."""
    made: dict[str, tuple[Path, Path]] = {}

    def get(name: str) -> tuple[Path, Path]:
        if name not in made:
            made[name] = scenarios.write_inputs(name, tmp_path_factory.mktemp(f"inputs-{name}"))
        return made[name]

    return get


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory, scenario_inputs, workflow_env):
    """``get(name)`` → (workdir, the Snakemake process) of a completed run of scenario ``name``,
    run once per session and shared by every test that reads it. A test that changes a run
    works on ``scenarios.clone`` of it."""
    runs: dict[str, tuple[Path, object]] = {}

    def get(name: str):
        if name not in runs:
            workdir = scenarios.make_workdir(tmp_path_factory.mktemp(f"run-{name}") / "run",
                                             *scenario_inputs(name), scenario=name)
            runs[name] = workdir, scenarios.snakemake(workdir, "--cores", "2", env=workflow_env)
        return runs[name]

    return get
