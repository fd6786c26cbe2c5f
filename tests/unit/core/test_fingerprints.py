"""Fingerprints of the dataset and the model follow content, never paths or timestamps (the
binary's: tests/unit/vipune/test_binary.py)."""

import os
import shutil

import pytest

from support.tinymodel import build_tiny_model
from vipune_eval.core import fingerprints
from vipune_eval.core.io import sha256_file
from vipune_eval.errors import EvalError


def test_model_fingerprint_tracks_bytes_and_pooling_not_location(tmp_path):
    model = build_tiny_model(tmp_path / "a")
    kwargs = dict(
        repo_id="BAAI/bge-small-en-v1.5",
        revision="r",
        file="model.onnx",
        cache=fingerprints.Sha256Cache(tmp_path / "cache.json"),
    )
    first = fingerprints.model_fingerprint(model, pooling="mean", **kwargs)
    shutil.copytree(model, tmp_path / "b")
    assert fingerprints.model_fingerprint(tmp_path / "b", pooling="mean", **kwargs) == first
    assert fingerprints.model_fingerprint(model, pooling="cls", **kwargs) != first
    build_tiny_model(tmp_path / "c", seed=7)
    assert fingerprints.model_fingerprint(tmp_path / "c", pooling="mean", **kwargs) != first
    with pytest.raises(EvalError, match="model file .* not found"):
        fingerprints.model_fingerprint(model, pooling="mean", **{**kwargs, "file": "onnx/model.onnx"})


def test_local_dataset_sha256_is_verified_and_cached(tmp_path):
    data = tmp_path / "d.json"
    data.write_text("[]")
    sha = sha256_file(data)
    fp = fingerprints.local_dataset_fingerprint(data, sha, fingerprints.Sha256Cache(tmp_path / "cache.json"))
    assert fp["sha256"] == sha
    with pytest.raises(EvalError, match=f"sha256 mismatch for {data}"):
        fingerprints.local_dataset_fingerprint(data, "0" * 64, fingerprints.Sha256Cache(tmp_path / "cache.json"))


def test_dataset_checksum_cache_sees_an_edit_that_restores_size_and_mtime(tmp_path):
    data = tmp_path / "data.json"
    data.write_text("[1, 2, 3]")
    cache = tmp_path / "cache.json"
    first = fingerprints.cached_sha256(data, cache)
    stat = data.stat()
    data.write_text("[1, 2, 4]")  # same size
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the old mtime
    assert fingerprints.cached_sha256(data, cache) != first


def test_the_cache_writes_only_when_saved_and_keeps_what_another_process_added(tmp_path):
    """Parsing the Snakefile writes nothing (a dry run parses it too): what the cache learns
    stays in memory until the run saves it, merged with what others saved meanwhile."""
    data = tmp_path / "data.json"
    data.write_text("[1, 2, 3]")
    file = tmp_path / "cache.json"
    cache = fingerprints.Sha256Cache(file)
    assert cache.sha256(data) == sha256_file(data) and not file.exists()
    other = tmp_path / "other.json"
    other.write_text("[]")
    fingerprints.remember_sha256(other, "a" * 64, file)  # a job saves at once
    cache.save()
    assert fingerprints.Sha256Cache(file).sha256(data) == sha256_file(data)
    assert fingerprints.Sha256Cache(file).sha256(other) == "a" * 64  # kept, not what hashing gives
    mtime = file.stat().st_mtime_ns
    cache.save()  # nothing new: not written again
    assert file.stat().st_mtime_ns == mtime
