"""The three things a user changes — dataset, model, vipune binary — and their fingerprints.

A fingerprint is a small JSON document that changes exactly when the thing's content changes
(never when it is merely touched or moved). The workflow makes them the inputs of the stages,
so Snakemake reruns only what a change made stale.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

from vipune_eval.core.io import EvalError, log, read_json, sha256_file, write_json_if_changed

MODEL_SIDE_FILES = ("tokenizer.json", "tokenizer_config.json", "config.json", "special_tokens_map.json")


def cached_sha256(path: Path, cache_file: Path) -> str:
    """sha256 of ``path``, remembered by (real path, inode, size, mtime, ctime) so a 2.7 GB file
    is hashed once. ctime cannot be set back by hand, so an edit that restores size and mtime is
    still seen; deleting ``cache_file`` forces every file to be hashed again."""
    real = path.resolve()
    stat = real.stat()
    key = f"{real}|{stat.st_ino}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ctime_ns}"
    cache: dict[str, str] = {}
    if cache_file.exists():
        try:
            cache = json.loads(cache_file.read_text())
        except json.JSONDecodeError:
            cache = {}
    if key not in cache:
        cache[key] = sha256_file(real)
        write_json_if_changed(cache_file, cache)
    return cache[key]


@contextlib.contextmanager
def hub_errors(what: str, local_key: str) -> Iterator[None]:
    """Turn the hub client's assorted network and HTTP errors into one actionable message."""
    try:
        yield
    except EvalError:
        raise
    except Exception as exc:  # huggingface_hub raises HTTP, offline-mode and connection errors
        raise EvalError(f"cannot download the {what} from the Hugging Face hub: "
                        f"{type(exc).__name__}: {exc}",
                        fix=f"offline, or behind a mirror? Put a local copy in place and set "
                            f"{local_key} in the config to it") from exc


# ---------------------------------------------------------------- dataset


def dataset_fingerprint(sha256: str, *, repo_id: str | None = None, filename: str | None = None,
                        revision: str | None = None, resolved_commit: str | None = None) -> dict[str, Any]:
    return {"kind": "dataset", "sha256": sha256, "repo_id": repo_id, "filename": filename,
            "revision": revision, "resolved_commit": resolved_commit}


def check_sha256(path: Path, actual: str, expected: str | None) -> None:
    if expected and actual.lower() != expected.lower():
        raise EvalError(f"sha256 mismatch for {path}: expected {expected}, got {actual}; the "
                        "file is damaged or is not the pinned release",
                        fix="delete the file (it is downloaded again), or fix dataset.sha256 in "
                            "the config")


def local_dataset_fingerprint(path: Path, expected_sha256: str | None, cache_file: Path) -> dict[str, Any]:
    if not path.is_file():
        raise EvalError(f"dataset.path {path} does not exist or is not a file",
                        fix="set dataset.path in the config to a LongMemEval-format JSON file, or "
                            "to null to download the dataset")
    sha = cached_sha256(path, cache_file)
    check_sha256(path, sha, expected_sha256)
    return dataset_fingerprint(sha, filename=path.name)


def download_dataset(repo_id: str, filename: str, revision: str, sha256: str | None,
                     dest: Path, fingerprint_out: Path) -> dict[str, Any]:
    """Fetch ``filename`` from the hub dataset ``repo_id`` at ``revision`` into ``dest_dir``."""
    from huggingface_hub import HfApi, hf_hub_download

    with hub_errors(f"dataset {repo_id}/{filename} at {revision}", "dataset.path"):
        commit = HfApi().dataset_info(repo_id, revision=revision).sha
        log.info("downloading %s/%s at %s (commit %s)", repo_id, filename, revision, commit)
        path = Path(hf_hub_download(repo_id, filename, repo_type="dataset", revision=commit,
                                    local_dir=dest))
    sha = sha256_file(path)
    check_sha256(path, sha, sha256)
    if revision != commit or not sha256:
        log.info("to pin this dataset (a later run then scores exactly these bytes), set in the "
                 "config: dataset.revision: %s and dataset.sha256: %s", commit, sha)
    fingerprint = dataset_fingerprint(sha, repo_id=repo_id, filename=filename, revision=revision,
                                      resolved_commit=commit)
    write_json_if_changed(fingerprint_out, fingerprint)
    return fingerprint


# ---------------------------------------------------------------- model


def model_fingerprint(model_dir: Path, *, repo_id: str, revision: str, file: str, pooling: str,
                      cache_file: Path) -> dict[str, Any]:
    """Revision, pooling recipe and the sha256 of the ONNX file and tokenizer files."""
    onnx_path = model_dir / file
    if not onnx_path.is_file():
        raise EvalError(f"model file {onnx_path} not found (model.path={model_dir}, model.file={file})",
                        fix="set model.path to a model folder and model.file to its ONNX file "
                            "inside it (model.path: null downloads the model)")
    if not (model_dir / "tokenizer.json").is_file():
        raise EvalError(f"{model_dir} has no tokenizer.json",
                        fix=f"a model folder needs the ONNX file and {', '.join(MODEL_SIDE_FILES)}: "
                            "copy them there, or set model.path: null to download the model")
    files = {file: cached_sha256(onnx_path, cache_file)}
    for name in MODEL_SIDE_FILES:
        if (model_dir / name).is_file():
            files[name] = sha256_file(model_dir / name)
    return {"kind": "model", "repo_id": repo_id, "revision": revision, "file": file,
            "pooling": pooling, "normalization": "l2", "files": files}


def download_model(repo_id: str, revision: str, file: str, pooling: str, dest: Path,
                   fingerprint_out: Path) -> dict[str, Any]:
    """Fetch the model files at ``revision`` into ``dest``; write and return its fingerprint."""
    from huggingface_hub import snapshot_download

    log.info("downloading model %s at %s (%s)", repo_id, revision, file)
    with hub_errors(f"model {repo_id} at {revision}", "model.path"):
        snapshot_download(repo_id, revision=revision, local_dir=dest,
                          allow_patterns=[file, *MODEL_SIDE_FILES])
    fingerprint = model_fingerprint(dest, repo_id=repo_id, revision=revision, file=file,
                                    pooling=pooling, cache_file=dest / ".sha256-cache.json")
    write_json_if_changed(fingerprint_out, fingerprint)
    return fingerprint


def build_vipune_hf_home(model_dir: Path, file: str, repo_id: str, revision: str, out: Path) -> Path:
    """Lay the model out as an hf-hub cache, the way vipune looks it up offline.

    vipune resolves ``$HF_HOME/hub/models--ORG--NAME/refs/<revision>`` to a snapshot folder and
    reads ``onnx/model.onnx`` (or ``model.onnx``) and ``tokenizer.json`` there. Files are copied,
    not linked, so the layout survives the user's model folder moving.
    """
    home = out
    repo_dir = home / "hub" / ("models--" + repo_id.replace("/", "--"))
    tmp = home.with_name(home.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    snapshot = tmp / repo_dir.relative_to(home) / "snapshots" / revision
    for name in (file, *MODEL_SIDE_FILES):
        if (model_dir / name).is_file():
            (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(model_dir / name, snapshot / name)
    refs = tmp / repo_dir.relative_to(home) / "refs"
    refs.mkdir(parents=True)
    (refs / revision).write_text(revision)
    shutil.rmtree(home, ignore_errors=True)
    os.replace(tmp, home)
    return home


# ---------------------------------------------------------------- vipune binary


def resolve_binary(binary: str) -> Path:
    """A bare name is looked up on PATH; a path must exist and be executable."""
    found = shutil.which(os.path.expanduser(binary)) if binary else None
    if found is None:
        raise EvalError(
            f"vipune binary {binary!r} not found or not executable",
            fix="install vipune (`cargo install vipune`, or build it: `cargo build --release` in "
                "a clone of randomm/vipune) and put it on PATH, or set vipune.binary in the "
                "config to its path. To run only the reference retrievers, drop 'vipune' and "
                "'vipune-semantic' from `retrievers`.")
    return Path(found).resolve()


def configured_binary(binary: str, fingerprint: Path) -> Path:
    """The executable behind a fingerprint (empty when the workflow knows no path for it)."""
    if not binary:
        raise EvalError(f"{fingerprint}: no vipune binary is configured for this fingerprint — set "
                        "vipune.binary or list its path in vipune.compare to (re)compute its results")
    return resolve_binary(binary)


def binary_fingerprint(path: Path, home: Path, timeout: float, cache_dir: Path,
                       extra_files: list[Path] | None = None) -> dict[str, Any]:
    """sha256 of the binary's bytes (and of ``extra_files``, e.g. the build a wrapper script
    runs) plus its ``--json version``; ``id`` = version-sha12 names its results folder."""
    sha = sha256_file(path)
    files = {str(f): sha256_file(f) for f in extra_files or []}
    content = sha if not files else hashlib.sha256(
        "\n".join([sha, *files.values()]).encode()).hexdigest()
    cached = cache_dir / f"vipune-version-{content}.json"
    if cached.exists():
        version = read_json(cached)["version"]
    else:
        from vipune_eval.vipune.client import Vipune

        version = Vipune(path, home, timeout).version(f"vipune.binary {path}")
        write_json_if_changed(cached, {"version": version})
    fingerprint = {"kind": "vipune", "sha256": sha, "version": version,
                   "id": f"{version}-{content[:12]}"}
    if files:
        fingerprint["files"] = {Path(name).name: digest for name, digest in files.items()}
        fingerprint["content_sha256"] = content
    return fingerprint
