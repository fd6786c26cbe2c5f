"""The fingerprints of the dataset and the model: small JSON documents that change exactly when the
thing's content changes (never when it is merely touched or moved). The workflow makes them the
inputs of the stages, so Snakemake reruns only what a change made stale. (The vipune binary's is
vipune_eval.vipune.binary's.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

from vipune_eval.core.io import sha256_file, write_json_if_changed
from vipune_eval.errors import EvalError


class _DatasetFingerprint(TypedDict):
    kind: str  # "dataset"
    sha256: str
    repo_id: str | None
    filename: str | None
    revision: str | None
    resolved_commit: str | None


class DatasetFingerprint(_DatasetFingerprint, total=False):
    """The dataset's fingerprint (``dataset_fingerprint``): report.json's provenance.dataset."""

    size: int  # the downloaded file's bytes (stages.download.download_dataset)


class ModelFingerprint(TypedDict):
    """The model's fingerprint (``model_fingerprint``)."""

    kind: str  # "model"
    repo_id: str
    revision: str
    file: str
    files: dict[str, str]  # file → sha256
    pooling: str
    normalization: str


MODEL_SIDE_FILES = ("tokenizer.json", "tokenizer_config.json", "config.json", "special_tokens_map.json")


def _stat_key(path: Path) -> str:
    real = path.resolve()
    stat = real.stat()
    return f"{real}|{stat.st_ino}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ctime_ns}"


def _read_cache(cache_file: Path) -> dict[str, str]:
    try:
        return json.loads(cache_file.read_text()) if cache_file.exists() else {}
    except json.JSONDecodeError:
        return {}


class Sha256Cache:
    """sha256 of files, remembered in ``file`` by (real path, inode, size, mtime, ctime) so a 2.7 GB
    file is hashed once. ctime cannot be set back by hand, so an edit that restores size and mtime
    is still seen; deleting the file forces every file to be hashed again.

    What it learns stays in memory until ``save``: parsing the Snakefile writes nothing (a dry
    run, --lint and --report parse it too), so the workflow saves its cache when a real run
    starts (onstart); a job saves at once (``cached_sha256``)."""

    def __init__(self, file: Path):
        self.file = Path(file)
        self.learned: dict[str, str] = {}

    def sha256(self, path: Path) -> str:
        key = _stat_key(path)
        if key not in self.learned:
            self.learned[key] = _read_cache(self.file).get(key) or sha256_file(path.resolve())
        return self.learned[key]

    def remember(self, path: Path, sha256: str) -> None:
        """Record the sha256 of a file just written (computed while its bytes streamed)."""
        self.learned[_stat_key(path)] = sha256

    def save(self) -> None:
        """Merge what was learned into the file as it is now (another process may have added to it)."""
        if self.learned:
            write_json_if_changed(self.file, {**_read_cache(self.file), **self.learned})


def cached_sha256(path: Path, cache_file: Path) -> str:
    """sha256 of ``path`` through the cache in ``cache_file``, saved at once (a job's)."""
    cache = Sha256Cache(cache_file)
    sha = cache.sha256(path)
    cache.save()
    return sha


def remember_sha256(path: Path, sha256: str, cache_file: Path) -> None:
    """Record the sha256 of a file just written in ``cache_file`` (a job's)."""
    cache = Sha256Cache(cache_file)
    cache.remember(path, sha256)
    cache.save()


def dataset_fingerprint(
    sha256: str,
    *,
    repo_id: str | None = None,
    filename: str | None = None,
    revision: str | None = None,
    resolved_commit: str | None = None,
) -> DatasetFingerprint:
    return {
        "kind": "dataset",
        "sha256": sha256,
        "repo_id": repo_id,
        "filename": filename,
        "revision": revision,
        "resolved_commit": resolved_commit,
    }


def check_sha256(path: Path, actual: str, expected: str | None) -> None:
    if expected and actual.lower() != expected.lower():
        raise EvalError(
            f"sha256 mismatch for {path}: expected {expected}, got {actual}; the "
            "file is damaged or is not the pinned release",
            fix="delete the file (it is downloaded again), or fix dataset.sha256 in the config",
        )


def local_dataset_fingerprint(path: Path, expected_sha256: str | None, cache: Sha256Cache) -> DatasetFingerprint:
    if not path.is_file():
        raise EvalError(
            f"dataset.path {path} does not exist or is not a file",
            fix="set dataset.path in the config to a LongMemEval-format JSON file, or to null to download the dataset",
        )
    sha = cache.sha256(path)
    check_sha256(path, sha, expected_sha256)
    return dataset_fingerprint(sha, filename=path.name)


def model_fingerprint(
    model_dir: Path, *, repo_id: str, revision: str, file: str, pooling: str, cache: Sha256Cache
) -> ModelFingerprint:
    """Revision, pooling recipe and the sha256 of the ONNX file and tokenizer files."""
    onnx_path = model_dir / file
    if not onnx_path.is_file():
        raise EvalError(
            f"model file {onnx_path} not found (model.path={model_dir}, model.file={file})",
            fix="set model.path to a model folder and model.file to its ONNX file "
            "inside it (model.path: null downloads the model)",
        )
    if not (model_dir / "tokenizer.json").is_file():
        raise EvalError(
            f"{model_dir} has no tokenizer.json",
            fix=f"a model folder needs the ONNX file and {', '.join(MODEL_SIDE_FILES)}: "
            "copy them there, or set model.path: null to download the model",
        )
    files = {file: cache.sha256(onnx_path)}
    for name in MODEL_SIDE_FILES:
        if (model_dir / name).is_file():
            files[name] = sha256_file(model_dir / name)
    return {
        "kind": "model",
        "repo_id": repo_id,
        "revision": revision,
        "file": file,
        "pooling": pooling,
        "normalization": "l2",
        "files": files,
    }
