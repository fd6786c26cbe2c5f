"""Fingerprints follow content, never paths or timestamps; downloads verify and record."""

import os
import shutil

import pytest

from vipune_eval.core import fingerprints
from vipune_eval.stages import download as download_stage
from vipune_eval.vipune import binary, model_cache
from vipune_eval.core.io import sha256_file
from vipune_eval.errors import EvalError
from support.tinymodel import build_tiny_model


@pytest.fixture
def fake_binary(tmp_path, fake_vipune_bin):
    copy = tmp_path / "bin" / "vipune"
    copy.parent.mkdir()
    shutil.copy(fake_vipune_bin, copy)
    return copy


def test_binary_fingerprint_ignores_path_and_mtime_but_not_bytes(tmp_path, fake_binary):
    first = binary.binary_fingerprint(fake_binary, tmp_path / "home", 30, tmp_path / "cache")
    assert first["sha256"] == sha256_file(fake_binary)
    assert first["id"] == f"{first['version']}-{first['sha256'][:12]}"
    os.utime(fake_binary, (1, 1))
    other = tmp_path / "elsewhere" / "vipune-copy"
    other.parent.mkdir()
    shutil.copy(fake_binary, other)
    assert binary.binary_fingerprint(other, tmp_path / "home", 30, tmp_path / "cache") == first
    with fake_binary.open("a") as handle:
        handle.write("# rebuilt\n")
    assert binary.binary_fingerprint(fake_binary, tmp_path / "home", 30, tmp_path / "cache")["id"] != first["id"]


def test_resolve_binary_explains_how_to_get_vipune(monkeypatch, fake_binary):
    monkeypatch.setenv("PATH", str(fake_binary.parent))
    assert binary.resolve_binary("vipune") == fake_binary.resolve()
    with pytest.raises(EvalError, match="cargo install vipune"):
        binary.resolve_binary("no-such-vipune")


def test_binary_that_does_not_print_version_json_is_named(tmp_path):
    liar = tmp_path / "vipune"
    liar.write_text("#!/bin/sh\necho 'vipune 0.9.1'\n")
    liar.chmod(0o755)
    with pytest.raises(EvalError, match=r"did not print vipune's version JSON.*vipune 0.9.1"):
        binary.binary_fingerprint(liar, tmp_path / "home", 30, tmp_path / "cache")


def test_model_fingerprint_tracks_bytes_and_pooling_not_location(tmp_path):
    model = build_tiny_model(tmp_path / "a")
    kwargs = dict(repo_id="BAAI/bge-small-en-v1.5", revision="r", file="model.onnx",
                  cache_file=tmp_path / "cache.json")
    first = fingerprints.model_fingerprint(model, pooling="mean", **kwargs)
    shutil.copytree(model, tmp_path / "b")
    assert fingerprints.model_fingerprint(tmp_path / "b", pooling="mean", **kwargs) == first
    assert fingerprints.model_fingerprint(model, pooling="cls", **kwargs) != first
    build_tiny_model(tmp_path / "c", seed=7)
    assert fingerprints.model_fingerprint(tmp_path / "c", pooling="mean", **kwargs) != first
    with pytest.raises(EvalError, match="model file .* not found"):
        fingerprints.model_fingerprint(model, pooling="mean", **{**kwargs, "file": "onnx/model.onnx"})


def test_vipune_hf_home_has_the_layout_hf_hub_resolves(tmp_path):
    model = build_tiny_model(tmp_path / "m", onnx_name="onnx/model.onnx")
    home = model_cache.build_vipune_hf_home(model, "onnx/model.onnx", "BAAI/bge-small-en-v1.5", "abc123",
                                        tmp_path / "home")
    repo = home / "hub" / "models--BAAI--bge-small-en-v1.5"
    assert (repo / "refs" / "abc123").read_text() == "abc123"
    snapshot = repo / "snapshots" / "abc123"
    assert sha256_file(snapshot / "onnx/model.onnx") == sha256_file(model / "onnx/model.onnx")
    assert (snapshot / "tokenizer.json").is_file() and not (snapshot / "tokenizer.json").is_symlink()


def test_local_dataset_sha256_is_verified_and_cached(tmp_path):
    data = tmp_path / "d.json"
    data.write_text("[]")
    sha = sha256_file(data)
    fp = fingerprints.local_dataset_fingerprint(data, sha, tmp_path / "cache.json")
    assert fp["sha256"] == sha
    with pytest.raises(EvalError, match=f"sha256 mismatch for {data}"):
        fingerprints.local_dataset_fingerprint(data, "0" * 64, tmp_path / "cache.json")


def test_download_without_network_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EvalError, match=r"cannot download the dataset xiaowu0162/longmemeval/x.json at main.*set dataset.path"):
        download_stage.download_dataset("xiaowu0162/longmemeval", "x.json", "main", None, tmp_path / "d", tmp_path / "fp",
                                         limits=download_stage.HubLimits(60, 120))
    with pytest.raises(EvalError, match=r"cannot download the model BAAI/bge-small-en-v1.5 at abc.*set model.path"):
        download_stage.download_model("BAAI/bge-small-en-v1.5", "abc", "onnx/model.onnx", "mean", tmp_path / "m", tmp_path / "fp",
                                       limits=download_stage.HubLimits(60, 120))


@pytest.mark.parametrize("fault, message", [
    ("version-garbage", r"did not print vipune's version JSON \(exit code 0 after [\d.]+ s\); "
                        r"stdout: 'vipune: something went wrong \{'"),
    ("version-fail", r"did not print vipune's version JSON \(exit code 1 after [\d.]+ s\).*cannot initialise"),
    ("version-hang", r"did not finish within 2 s \(vipune.timeout\) and was killed"),
])
def test_a_version_call_that_fails_says_what_it_printed_its_exit_code_and_the_wait(
        tmp_path, fake_binary, monkeypatch, fault, message):
    """Regression: these read `MissingOutputException … vipune-missing.json` after a fixed 60 s."""
    monkeypatch.setenv("FAKE_VIPUNE_FAULT", fault)
    with pytest.raises(EvalError, match=message):
        binary.binary_fingerprint(fake_binary, tmp_path / "home", 2, tmp_path / "cache")


def test_fingerprint_files_make_a_change_behind_a_wrapper_count(tmp_path, fake_binary):
    build = tmp_path / "build" / "vipune-real"
    build.parent.mkdir()
    build.write_bytes(b"\x7fELF version 1")
    first = binary.binary_fingerprint(fake_binary, tmp_path / "home", 30, tmp_path / "cache", [build])
    plain = binary.binary_fingerprint(fake_binary, tmp_path / "home", 30, tmp_path / "cache")
    assert first["sha256"] == plain["sha256"] and first["id"] != plain["id"]
    assert first["files"] == {"vipune-real": sha256_file(build)}
    build.write_bytes(b"\x7fELF version 2")  # the wrapper is unchanged; what it runs is not
    second = binary.binary_fingerprint(fake_binary, tmp_path / "home", 30, tmp_path / "cache", [build])
    assert second["id"] != first["id"] and second["sha256"] == first["sha256"]


def test_dataset_checksum_cache_sees_an_edit_that_restores_size_and_mtime(tmp_path):
    data = tmp_path / "data.json"
    data.write_text("[1, 2, 3]")
    cache = tmp_path / "cache.json"
    first = fingerprints.cached_sha256(data, cache)
    stat = data.stat()
    data.write_text("[1, 2, 4]")  # same size
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the old mtime
    assert fingerprints.cached_sha256(data, cache) != first


def test_vipune_hf_home_puts_the_onnx_file_where_vipune_asks_first(tmp_path):
    """vipune asks hf-hub for onnx/model.onnx first and for model.onnx only after that request
    failed: a model folder's root model.onnx is laid out at onnx/model.onnx (no request)."""
    model = build_tiny_model(tmp_path / "m")
    home = model_cache.build_vipune_hf_home(model, "model.onnx", "BAAI/bge-small-en-v1.5", "abc123",
                                            tmp_path / "home")
    snapshot = home / "hub" / "models--BAAI--bge-small-en-v1.5" / "snapshots" / "abc123"
    assert sha256_file(snapshot / "onnx" / "model.onnx") == sha256_file(model / "model.onnx")
    assert not (snapshot / "model.onnx").exists()
