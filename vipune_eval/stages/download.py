"""download: the dataset and the model from the Hugging Face hub, pinned and verified, with their
fingerprints (vipune_eval.core.fingerprints).

The hub's protocol as huggingface_hub speaks it: the revision resolved to a commit through the
API (``HfApi().dataset_info`` / ``model_info``), each file then fetched from
``{endpoint}/{repo}/resolve/{commit}/{file}`` (``hf_hub_url``, the client's headers and session,
its error mapping ``hf_raise_for_status``). The transfer is ours, not ``hf_hub_download``'s, so the
sha256 of a 2.7 GB file is computed once while it streams: bytes go to ``<file>.part``, an
interrupted transfer resumes from there with a ``Range`` request, and only bytes whose size and
sha256 match the pins are renamed to the file's name (a mismatch deletes them). No request waits
for ever (``HubLimits``): each has a connect and read timeout, and a transfer that stops making
progress (a server sending a byte now and then) is stopped, its bytes kept for the rerun.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from vipune_eval.core.fingerprints import (
    MODEL_SIDE_FILES,
    DatasetFingerprint,
    ModelFingerprint,
    Sha256Cache,
    cached_sha256,
    dataset_fingerprint,
    model_fingerprint,
    remember_sha256,
)
from vipune_eval.core.io import Progress, log, write_json_if_changed
from vipune_eval.errors import EvalError

ATTEMPTS = 3  # transfers per file in one job: each one after the first resumes where the last stopped
PAPER_REPO = "xiaowu0162/longmemeval"  # serves its files without an extension


@dataclass(frozen=True)
class HubLimits:
    """How long the downloads wait (the config's ``download`` block): ``timeout`` seconds for a
    connection, and for each read of an answer (the revision lookup's and every transfer's);
    ``stall_timeout`` seconds a transfer may go without progress, a new MB of the file (what its
    log line counts) or its end."""

    timeout: float
    stall_timeout: float


@contextlib.contextmanager
def hub_errors(
    what: str, local_key: str, repo_id: str, limits: HubLimits, filename: str | None = None
) -> Iterator[None]:
    """Turn the hub client's network and HTTP errors into one message naming the file, the
    revision and what to do."""
    import httpx
    from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    offline = f"offline, or behind a mirror? Put a local copy in place and set {local_key} in the config to it"
    try:
        yield
    except EvalError:
        raise
    except httpx.TimeoutException as exc:  # a server that accepts the connection and stays silent
        raise EvalError(
            f"no answer from {exc.request.url} within {limits.timeout:g} s ({what})",
            fix=f"is HF_ENDPOINT ({_endpoint()}) the hub or a mirror that answers? Check it and "
            f"your network or proxy; on a slow link raise download.timeout; or put a "
            f"local copy in place and set {local_key} in the config to it",
        ) from None
    except EntryNotFoundError as exc:
        fix = offline
        if filename and repo_id == PAPER_REPO and filename.endswith(".json"):
            fix = (
                f"{PAPER_REPO} serves its files without an extension: set dataset.filename to "
                f"{filename.removesuffix('.json')!r} (or leave it null: the preset's name)"
            )
        raise EvalError(f"the hub has no file {filename!r} in {repo_id} ({what})", fix=fix) from exc
    except RevisionNotFoundError as exc:
        raise EvalError(
            f"the hub has no such revision of {repo_id} ({what})",
            fix="set the revision to a commit, branch or tag of that repository",
        ) from exc
    except RepositoryNotFoundError as exc:
        raise EvalError(
            f"the hub has no repository {repo_id} ({what})",
            fix="check the repository's name (or log in, if it is private)",
        ) from exc
    except Exception as exc:  # connection errors, offline mode, other HTTP errors
        raise EvalError(
            f"cannot download the {what} from the Hugging Face hub: {type(exc).__name__}: {exc}", fix=offline
        ) from exc


def _endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def resolve_commit(repo_id: str, revision: str, repo_type: str, limits: HubLimits) -> str:
    """The commit a branch, tag or commit of the repository names (the hub's revision API)."""
    from huggingface_hub import HfApi

    info = HfApi().dataset_info if repo_type == "dataset" else HfApi().model_info
    commit = info(repo_id, revision=revision, timeout=limits.timeout).sha
    if commit is None:  # the hub's answer names no commit (its type allows that)
        raise EvalError(
            f"the hub named no commit for {repo_type} {repo_id} at revision {revision!r}",
            fix="give the revision as a commit hash, or try again",
        )
    return commit


def fetch(
    repo_id: str,
    filename: str,
    commit: str,
    repo_type: str,
    dest: Path,
    *,
    sha256: str | None,
    size: int | None,
    what: str,
    cache_file: Path,
    limits: HubLimits,
) -> tuple[str, int]:
    """``filename`` at ``commit`` into ``dest``, verified against ``sha256`` and ``size`` (where
    pinned) before it takes its name; returns its sha256 and size, and records the sha256 in
    ``cache_file`` (the fingerprints read it there). A file already there that matches the pins is
    kept; a ``.part`` left by an interrupted transfer is resumed."""
    if dest.is_file() and sha256:
        if dest.stat().st_size == (size or dest.stat().st_size) and cached_sha256(dest, cache_file) == sha256.lower():
            log.info("%s: already here and matches its sha256", dest)
            return sha256.lower(), dest.stat().st_size
    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, ATTEMPTS + 1):
        try:
            digest, total = _transfer(repo_id, filename, commit, repo_type, part, what, sha256, size, limits)
            break
        except _Interrupted as cut:
            if attempt == ATTEMPTS:
                raise EvalError(
                    f"the transfer of {what} from {cut.url} stopped {ATTEMPTS} times "
                    f"(last at {cut.kept} bytes; kept in {part})",
                    fix="run the workflow again: the transfer resumes where it stopped",
                ) from None
            log.warning("%s: transfer interrupted at %s bytes; resuming", what, cut.kept)
    if size is not None and total != size:
        part.unlink()
        raise EvalError(
            f"{what}: received {total} bytes, the pin says {size}; the bytes were deleted",
            fix="run again; if it repeats, the served file is not the pinned release",
        )
    if sha256 and digest != sha256.lower():
        part.unlink()
        raise EvalError(
            f"sha256 mismatch for {what}: pinned {sha256.lower()}, received {digest}; "
            "the bytes were deleted, so a rerun downloads them again",
            fix="a mirror or proxy serving other bytes? Or set the pin in the config to the file you mean to score",
        )
    part.replace(dest)
    remember_sha256(dest, digest, cache_file)
    return digest, total


class _Interrupted(Exception):
    """The connection to ``url`` ended before the response's last byte, ``kept`` bytes in."""

    def __init__(self, kept: int, url: str):
        super().__init__(kept, url)
        self.kept, self.url = kept, url


def _announced(response, sha256: str | None, size: int | None, what: str) -> None:
    """Refuse before the transfer what the hub says is other bytes: an LFS file's redirect
    carries its sha256 (``X-Linked-Etag``) and size (``X-Linked-Size``)."""
    headers = next((r.headers for r in response.history if "X-Linked-Etag" in r.headers), response.headers)
    etag = (headers.get("X-Linked-Etag") or "").strip('"').removeprefix("W/").strip('"').lower()
    linked = headers.get("X-Linked-Size")
    if sha256 and len(etag) == 64 and etag != sha256.lower():
        raise EvalError(
            f"sha256 mismatch for {what}: pinned {sha256.lower()}, the hub announces {etag}; nothing was downloaded",
            fix="the revision holds another file under that name: set the pin in the config "
            "to the file you mean to score, or the revision to the pinned commit",
        )
    if size is not None and linked and int(linked) != size:
        raise EvalError(
            f"{what}: the hub announces {linked} bytes, the pin says {size}; nothing was downloaded",
            fix="the revision holds another file under that name: set the revision to the pinned commit",
        )


def _transfer(
    repo_id: str,
    filename: str,
    commit: str,
    repo_type: str,
    part: Path,
    what: str,
    sha256: str | None,
    size: int | None,
    limits: HubLimits,
) -> tuple[str, int]:
    import httpx
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    digest, have = hashlib.sha256(), 0
    if part.exists():  # bytes an earlier transfer kept: hashed once, then continued
        with open(part, "rb") as handle:
            while block := handle.read(1 << 22):
                digest.update(block)
                have += len(block)
    headers = build_hf_headers()
    if have:
        headers["Range"] = f"bytes={have}-"
    url = hf_hub_url(repo_id, filename, repo_type=repo_type, revision=commit)
    answered = False
    try:
        with get_session().stream(
            "GET", url, headers=headers, follow_redirects=True, timeout=limits.timeout
        ) as response:
            answered = True
            if response.status_code == 416 and have:  # nothing after the kept bytes: they are all of it
                return digest.hexdigest(), have
            if response.status_code >= 400:
                response.read()
            hf_raise_for_status(response)
            _announced(response, sha256, size, what)
            if have and response.status_code != 206:  # the server sent the whole file again
                digest, have = hashlib.sha256(), 0
            length = int(response.headers.get("Content-Length") or 0)
            progress = Progress(f"downloading {what}", (have + length) >> 20, unit="MB")
            shown, moved = have >> 20, time.monotonic()
            with open(part, "ab" if have else "wb") as out:
                for block in response.iter_bytes():
                    out.write(block)
                    digest.update(block)
                    have += len(block)
                    if have >> 20 > shown:
                        progress.advance((have >> 20) - shown)
                        shown, moved = have >> 20, time.monotonic()
                    elif time.monotonic() - moved > limits.stall_timeout:
                        out.flush()
                        raise _stalled(url, response, what, part, limits)
    except httpx.ReadTimeout as exc:
        if not answered:  # no answer at all: hub_errors names the URL; retrying would wait as long again
            raise
        raise _Interrupted(part.stat().st_size if part.exists() else 0, url) from exc
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        raise _Interrupted(part.stat().st_size if part.exists() else 0, url) from exc
    if length and have < length:
        raise _Interrupted(have, url)
    return digest.hexdigest(), have


def _stalled(url: str, response, what: str, part: Path, limits: HubLimits) -> EvalError:
    """A transfer that still receives a byte now and then (so no read times out) but no MB."""
    served_by = response.url.host if response.url.host != response.request.url.host else None
    return EvalError(
        f"the transfer of {what} from {url}"
        + (f" (served by {served_by})" if served_by else "")
        + f" stalled: less than 1 MB in {limits.stall_timeout:g} s; the "
        f"{part.stat().st_size} bytes received are kept in {part}",
        fix="run the workflow again: the transfer resumes where it stopped. If it stalls again, "
        f"check HF_ENDPOINT ({_endpoint()}), your network or proxy; on a link slower than "
        "1 MB in that time, raise download.stall_timeout",
    )


# ---------------------------------------------------------------- dataset


def download_dataset(
    repo_id: str,
    filename: str,
    revision: str,
    sha256: str | None,
    dest: Path,
    fingerprint_out: Path,
    *,
    limits: HubLimits,
    size: int | None = None,
) -> DatasetFingerprint:
    """Fetch ``filename`` from the hub dataset ``repo_id`` at ``revision`` into ``dest``,
    verified against ``sha256`` and ``size``; write and return its fingerprint."""
    what = f"dataset {repo_id}/{filename} at {revision}"
    with hub_errors(what, "dataset.path", repo_id, limits, filename):
        commit = resolve_commit(repo_id, revision, "dataset", limits)
        log.info("downloading %s/%s at %s (commit %s)", repo_id, filename, revision, commit)
        sha, got = fetch(
            repo_id,
            filename,
            commit,
            "dataset",
            Path(dest) / filename,
            sha256=sha256,
            size=size,
            what=what,
            cache_file=Path(dest) / ".sha256-cache.json",
            limits=limits,
        )
    if revision != commit or not sha256:
        log.info(
            "to pin this dataset (a later run then scores exactly these bytes), set in the "
            "config: dataset.revision: %s and dataset.sha256: %s",
            commit,
            sha,
        )
    fingerprint = dataset_fingerprint(
        sha, repo_id=repo_id, filename=filename, revision=revision, resolved_commit=commit
    )
    fingerprint["size"] = got
    write_json_if_changed(fingerprint_out, fingerprint)
    return fingerprint


# ---------------------------------------------------------------- model


def download_model(
    repo_id: str,
    revision: str,
    file: str,
    pooling: str,
    dest: Path,
    fingerprint_out: Path,
    *,
    limits: HubLimits,
    sha256: list[str] | None = None,
) -> ModelFingerprint:
    """Fetch the model's ONNX file and tokenizer files at ``revision`` into ``dest``, each pinned
    one (``sha256``: ``FILE=HASH`` items) verified; write and return the model's fingerprint."""
    from huggingface_hub.errors import EntryNotFoundError

    pins = dict(item.split("=", 1) for item in sha256 or [])
    what = f"model {repo_id} at {revision}"
    cache_file = Path(dest) / ".sha256-cache.json"
    with hub_errors(what, "model.path", repo_id, limits):
        commit = resolve_commit(repo_id, revision, "model", limits)
    log.info("downloading model %s at %s (commit %s): %s", repo_id, revision, commit, file)
    for name in (file, *MODEL_SIDE_FILES):
        try:
            with hub_errors(what, "model.path", repo_id, limits, name):
                fetch(
                    repo_id,
                    name,
                    commit,
                    "model",
                    Path(dest) / name,
                    sha256=pins.get(name),
                    size=None,
                    what=f"{name} of {what}",
                    cache_file=cache_file,
                    limits=limits,
                )
        except EvalError as exc:
            if name in (file, "tokenizer.json") or not isinstance(exc.__cause__, EntryNotFoundError):
                raise
            log.info("%s has no %s (optional)", what, name)
    fingerprint = model_fingerprint(
        dest, repo_id=repo_id, revision=revision, file=file, pooling=pooling, cache=Sha256Cache(cache_file)
    )
    write_json_if_changed(fingerprint_out, fingerprint)
    return fingerprint
