"""The vipune binary: finding it, its fingerprint, and making a job run the bytes it was planned for.

A build is known by the sha256 of its bytes (and of any extra files a wrapper script runs) plus
what ``vipune --json version`` says; ``id`` = version-sha12 names its results folder.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from vipune_eval.core.build_records import VipuneFingerprint
from vipune_eval.core.io import planned_copy, read_json, sha256_file
from vipune_eval.errors import BinaryNotFound, EvalError
from vipune_eval.vipune.client import Vipune
from vipune_eval.vipune.settings import VipuneSettings

# The fingerprint id of a vipune.binary that is not there (and of its vipune-lane): its jobs wait on the
# rule that reports it, so dry runs and --lint work without vipune.
MISSING = "missing"


def resolve_binary(binary: str) -> Path:
    """A bare name is looked up on PATH; a path must exist and be executable."""
    found = shutil.which(os.path.expanduser(binary)) if binary else None
    if found is None:
        raise BinaryNotFound(
            f"vipune binary {binary!r} not found or not executable",
            fix="build vipune and its vipune-lane with `.ci/vipune/build.sh` (cargo, crates.io and PyPI) "
            "and set vipune.binary to the path it prints, or put its folder on PATH (a `cargo "
            "install vipune` has no lane: then drop 'vipune-lib' and 'vipune-lib-semantic'). To "
            "run only the reference retrievers, drop 'vipune', 'vipune-semantic', 'vipune-lib' "
            "and 'vipune-lib-semantic' from `retrievers`.",
        )
    return Path(found).resolve()


def lock_deviations(binary: Path) -> list[str]:
    """The crates .ci/vipune/build.sh moved off the build's own Cargo.lock because the registry
    lacked the pinned version (its lock-deviations.txt beside bin/), as "crate 1.0.11 → 1.0.10"."""
    record = Path(binary).resolve().parent.parent / "lock-deviations.txt"
    if not record.is_file():
        return []
    moves = re.findall(r"(?:Downgrading|Updating|Upgrading) (\S+) v(\S+) -> v(\S+)", record.read_text(errors="replace"))
    return [f"{crate} {old} → {new}" for crate, old, new in dict.fromkeys(moves)]


def build_profile(binary: Path) -> str | None:
    """The cargo profile .ci/vipune/build.sh built ``binary`` with when it was not vipune's release
    profile (its build-profile.txt beside bin/: "fast" for ``--checkout DIR --fast``), else None."""
    record = Path(binary).resolve().parent.parent / "build-profile.txt"
    return record.read_text().strip() or None if record.is_file() else None


@dataclass(frozen=True)
class PlannedBinary:
    """What a job runs: ``path``, its private copy of the planned bytes; ``shown``, the binary as
    planned (what its messages name); the ``fingerprint`` its results are filed under; and
    ``wrapped``, each file a wrapper script named as vipune.binary runs (vipune.fingerprint_files)
    with its planned sha256."""

    path: Path
    shown: Path
    fingerprint: VipuneFingerprint
    wrapped: dict[str, str]

    def check_wrapped(self) -> None:
        """The files a wrapper script runs cannot be copied with it (it names them by path), so
        they are checked again after each persona, before its results are kept: one rebuilt while
        the job runs stops the job instead of filing another build's rankings under this
        fingerprint. (A file changed and changed back between two checks would go unseen; a
        binary that is no wrapper runs from its copy and has no such window.)"""
        for file, planned in self.wrapped.items():
            now = sha256_file(file) if Path(file).is_file() else None
            if now != planned:
                raise EvalError(
                    f"{file} (in vipune.fingerprint_files: the wrapper script {self.shown} runs it) changed "
                    f"while this job ran: sha256 {planned[:12]} planned, {now[:12] if now else 'gone'} now; "
                    "nothing searched after the change is kept",
                    fix="rerun snakemake: the personas searched before the change are kept and the new bytes "
                    "are planned as a build of their own (restore the file to finish the planned build)",
                )


def wrapped_record(fingerprint: Path) -> Path:
    """Beside a binary's fingerprint file: the paths of vipune.fingerprint_files and their
    sha256, for its jobs to check (not in the fingerprint itself: a path is no part of a build,
    and the same build on a laptop and a cluster must have one fingerprint)."""
    return fingerprint.with_suffix(".wrapped.json")


def planned_binary(vipune: VipuneSettings, folder: Path) -> PlannedBinary:
    """The executable a job runs, as a private copy in ``folder`` (the one way a job finds its
    binary). ``vipune.binary`` is empty for a build the workflow knows by its fingerprint id alone
    (evaluated here before, not configured now): refused, saying how to name it; a planned path
    that is gone (its build replaced since) is refused naming the fix."""
    if not vipune.binary:
        raise EvalError(
            f"{vipune.fingerprint}: no vipune binary is configured for this build, known "
            "here by its fingerprint id alone, so its results cannot be computed again",
            fix="set vipune.binary to the build's path, or list its path (not its id) in vipune.compare",
        )
    try:
        path = resolve_binary(vipune.binary)
    except BinaryNotFound as exc:
        if not os.path.isabs(vipune.binary):
            raise
        raise EvalError(
            f"{vipune.binary}, the vipune binary this job was planned for, is gone",
            fix="rerun snakemake so it re-plans (build.sh keeps a few earlier builds of a "
            "checkout; this one was replaced since)",
        ) from exc
    copy, fingerprint = planned_copy(path, vipune.fingerprint, "binary", folder)
    wrapped: dict[str, str] = {}
    if fingerprint.get("files"):
        record = wrapped_record(vipune.fingerprint)
        if not record.is_file():
            raise EvalError(
                f"{vipune.fingerprint} names files a wrapper script runs, but {record}, which says "
                "where they are, is missing",
                fix="rerun snakemake so it re-plans",
            )
        wrapped = read_json(record)["files"]
    # cast: the file binary_fingerprint wrote (plan.builds)
    planned = PlannedBinary(copy, path, cast(VipuneFingerprint, fingerprint), wrapped)
    planned.check_wrapped()
    return planned


def binary_fingerprint(
    path: Path, timeout: float, extra_files: list[Path] | None = None, versions: dict[str, str] | None = None
) -> VipuneFingerprint:
    """sha256 of the binary's bytes (and of ``extra_files``, e.g. the build a wrapper script
    runs) plus its ``--json version``; ``id`` = version-sha12 names its results folder.

    ``versions``: what the fingerprints of this results folder say, content sha256 → version:
    a build seen before is not run again (each call costs ~0.4 s, and every cluster job parses
    the Snakefile). Else vipune runs in a throwaway HOME: parsing writes nothing anywhere."""
    sha = sha256_file(path)
    files = {str(f): sha256_file(f) for f in extra_files or []}
    content = sha if not files else hashlib.sha256("\n".join([sha, *files.values()]).encode()).hexdigest()
    version = (versions or {}).get(content)
    if version is None:
        with tempfile.TemporaryDirectory(prefix="vipune-eval-version-") as home:
            version = Vipune(path, Path(home), timeout).version(f"vipune.binary {path}")
    fingerprint: VipuneFingerprint = {
        "kind": "vipune",
        "sha256": sha,
        "version": version,
        "id": f"{version}-{content[:12]}",
    }
    if files:
        fingerprint["files"] = {Path(name).name: digest for name, digest in files.items()}
        fingerprint["content_sha256"] = content
    return fingerprint


def known_versions(fingerprints: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Content sha256 → version, from binary fingerprints (``binary_fingerprint``'s ``versions``)."""
    return {fp.get("content_sha256", fp["sha256"]): fp["version"] for fp in fingerprints.values()}
