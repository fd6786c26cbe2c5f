"""The three things a user changes — dataset, model, vipune binary — and their fingerprints.

A fingerprint is a small JSON document that changes exactly when the thing's content changes
(never when it is merely touched or moved). The workflow makes them the inputs of the stages,
so Snakemake reruns only what a change made stale.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator

from .io import EvalError, log, read_json, sha256_file, write_json_if_changed

MODEL_SIDE_FILES = ("tokenizer.json", "tokenizer_config.json", "config.json", "special_tokens_map.json")


def cached_sha256(path: Path, cache_file: Path) -> str:
    """sha256 of ``path``, remembered by (real path, size, mtime) so a 2.7 GB file is hashed once."""
    real = path.resolve()
    stat = real.stat()
    key = f"{real}|{stat.st_size}|{stat.st_mtime_ns}"
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
                        f"{type(exc).__name__}: {exc}. Offline, or behind a mirror? Put a local "
                        f"copy in place and set {local_key} in the config.") from exc


# ---------------------------------------------------------------- dataset


def dataset_fingerprint(sha256: str, *, repo_id: str | None = None, filename: str | None = None,
                        revision: str | None = None, resolved_commit: str | None = None) -> dict[str, Any]:
    return {"kind": "dataset", "sha256": sha256, "repo_id": repo_id, "filename": filename,
            "revision": revision, "resolved_commit": resolved_commit}


def check_sha256(path: Path, actual: str, expected: str | None) -> None:
    if expected and actual.lower() != expected.lower():
        raise EvalError(f"sha256 mismatch for {path}: expected {expected}, got {actual}. "
                        "The file is damaged or is not the pinned release; delete it or fix "
                        "dataset.sha256 in the config.")


def local_dataset_fingerprint(path: Path, expected_sha256: str | None, cache_file: Path) -> dict[str, Any]:
    if not path.is_file():
        raise EvalError(f"dataset.path {path} does not exist or is not a file")
    sha = cached_sha256(path, cache_file)
    check_sha256(path, sha, expected_sha256)
    return dataset_fingerprint(sha, filename=path.name)


def download_dataset(repo_id: str, filename: str, revision: str, expected_sha256: str | None,
                     dest_dir: Path, fingerprint_out: Path) -> dict[str, Any]:
    """Fetch ``filename`` from the hub dataset ``repo_id`` at ``revision`` into ``dest_dir``."""
    from huggingface_hub import HfApi, hf_hub_download

    with hub_errors(f"dataset {repo_id}/{filename} at {revision}", "dataset.path"):
        commit = HfApi().dataset_info(repo_id, revision=revision).sha
        log.info("downloading %s/%s at %s (commit %s)", repo_id, filename, revision, commit)
        path = Path(hf_hub_download(repo_id, filename, repo_type="dataset", revision=commit,
                                    local_dir=dest_dir))
    sha = sha256_file(path)
    check_sha256(path, sha, expected_sha256)
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
        raise EvalError(f"model file {onnx_path} not found (model.path={model_dir}, model.file={file})")
    if not (model_dir / "tokenizer.json").is_file():
        raise EvalError(f"{model_dir} has no tokenizer.json; a model folder needs the ONNX file and "
                        f"{', '.join(MODEL_SIDE_FILES)}")
    files = {file: cached_sha256(onnx_path, cache_file)}
    for name in MODEL_SIDE_FILES:
        if (model_dir / name).is_file():
            files[name] = sha256_file(model_dir / name)
    return {"kind": "model", "repo_id": repo_id, "revision": revision, "file": file,
            "pooling": pooling, "normalization": "l2", "files": files}


def download_model(repo_id: str, revision: str, file: str, dest_dir: Path) -> Path:
    from huggingface_hub import snapshot_download

    log.info("downloading model %s at %s (%s)", repo_id, revision, file)
    with hub_errors(f"model {repo_id} at {revision}", "model.path"):
        snapshot_download(repo_id, revision=revision, local_dir=dest_dir,
                          allow_patterns=[file, *MODEL_SIDE_FILES])
    return dest_dir


def build_vipune_hf_home(model_dir: Path, file: str, repo_id: str, revision: str, home: Path) -> Path:
    """Lay the model out as an hf-hub cache, the way vipune looks it up offline.

    vipune resolves ``$HF_HOME/hub/models--ORG--NAME/refs/<revision>`` to a snapshot folder and
    reads ``onnx/model.onnx`` (or ``model.onnx``) and ``tokenizer.json`` there. Files are copied,
    not linked, so the layout survives the user's model folder moving.
    """
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
    found = shutil.which(os.path.expanduser(binary))
    if found is None:
        raise EvalError(
            f"vipune binary {binary!r} not found or not executable. Install vipune "
            "(`cargo install vipune`, or build it: `cargo build --release` in a clone of "
            "randomm/vipune) and put it on PATH, or set vipune.binary in the config to its path. "
            "To run only the reference retrievers, drop 'vipune' from `retrievers`.")
    return Path(found).resolve()


def binary_fingerprint(path: Path, cache_dir: Path) -> dict[str, Any]:
    """sha256 of the binary's bytes plus its ``--json version``; ``id`` names its result folder."""
    sha = sha256_file(path)
    cached = cache_dir / f"vipune-version-{sha}.json"
    if cached.exists():
        version = read_json(cached)
    else:
        cmd = [str(path), "--json", "version"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                                  env=isolated_env({}, cache_dir / "xdg"))
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EvalError(f"`{' '.join(cmd)}` failed to run: {exc}") from exc
        try:
            version = json.loads(proc.stdout)
            if proc.returncode != 0 or not isinstance(version.get("version"), str):
                raise ValueError(f"exit code {proc.returncode}")
        except (ValueError, AttributeError) as exc:
            raise EvalError(f"`{' '.join(cmd)}` did not print vipune's version JSON ({exc}); "
                            f"stdout: {proc.stdout[:300]!r} stderr: {proc.stderr[:300]!r}") from exc
        write_json_if_changed(cached, version)
    return {"kind": "vipune", "sha256": sha, "version": version["version"],
            "id": f"{version['version']}-{sha[:12]}"}


def isolated_env(extra: dict[str, str], xdg_config_home: Path) -> dict[str, str]:
    """The environment vipune runs in: no VIPUNE_* variables, a private, empty config home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIPUNE_")}
    xdg_config_home.mkdir(parents=True, exist_ok=True)
    env["XDG_CONFIG_HOME"] = str(xdg_config_home)
    env.update(extra)
    return env
