"""download: the dataset and the model from the Hugging Face hub, pinned and verified, with their
fingerprints (vipune_eval.core.fingerprints)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

from vipune_eval.core.fingerprints import MODEL_SIDE_FILES, check_sha256, dataset_fingerprint, model_fingerprint
from vipune_eval.core.io import log, sha256_file, write_json_if_changed
from vipune_eval.errors import EvalError


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


# ---------------------------------------------------------------- vipune binary


