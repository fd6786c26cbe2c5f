"""Shared pytest fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from vipune_eval.tinymodel import build_tiny_model

FAKE_VIPUNE = Path(__file__).resolve().parent / "fake_vipune.py"
BGE_REPO_DIR = "models--BAAI--bge-small-en-v1.5"
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
    """An ``HF_HOME`` holding the tiny model where vipune looks for bge-small-en-v1.5.

    Layout as hf-hub leaves it: ``hub/<repo>/refs/<rev>`` holds the commit sha and
    ``hub/<repo>/snapshots/<rev>/`` links ``onnx/model.onnx`` and ``tokenizer.json``.
    """
    hf_home = tmp_path / "hf_home"
    repo = hf_home / "hub" / BGE_REPO_DIR
    snapshot = repo / "snapshots" / BGE_REVISION
    (snapshot / "onnx").mkdir(parents=True)
    (snapshot / "onnx" / "model.onnx").symlink_to(vipune_tiny_model_dir / "model.onnx")
    for name in os.listdir(vipune_tiny_model_dir):
        if name.endswith(".json"):
            (snapshot / name).symlink_to(vipune_tiny_model_dir / name)
    (repo / "refs").mkdir()
    (repo / "refs" / BGE_REVISION).write_text(BGE_REVISION)
    return hf_home
