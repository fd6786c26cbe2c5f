"""The vipune binary: finding it, its fingerprint, and checking a job runs the bytes it was planned for.

A build is known by the sha256 of its bytes (and of any extra files a wrapper script runs) plus
what ``vipune --json version`` says; ``id`` = version-sha12 names its results folder.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from vipune_eval.core.io import check_planned_bytes, sha256_file
from vipune_eval.errors import BinaryNotFound, EvalError
from vipune_eval.vipune.client import Vipune
from vipune_eval.vipune.settings import VipuneSettings

# The fingerprint id of a vipune.binary that is not there (and of its lane): its jobs wait on the
# rule that reports it, so dry runs and --lint work without vipune.
MISSING = "missing"


def resolve_binary(binary: str) -> Path:
    """A bare name is looked up on PATH; a path must exist and be executable."""
    found = shutil.which(os.path.expanduser(binary)) if binary else None
    if found is None:
        raise BinaryNotFound(
            f"vipune binary {binary!r} not found or not executable",
            fix="build vipune and its lane with `.ci/vipune/build.sh` (cargo, crates.io and PyPI) "
                "and set vipune.binary to the path it prints, or put its folder on PATH (a `cargo "
                "install vipune` has no lane: then drop 'vipune-lib' and 'vipune-lib-semantic'). To "
                "run only the reference retrievers, drop 'vipune', 'vipune-semantic', 'vipune-lib' "
                "and 'vipune-lib-semantic' from `retrievers`.")
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


def planned_binary(vipune: VipuneSettings) -> tuple[Path, dict[str, Any]]:
    """The executable a job runs and the fingerprint it was planned for (the one way a job finds
    its binary). ``vipune.binary`` is empty for a build the workflow knows by its fingerprint id
    alone (evaluated here before, not configured now): refused, saying how to name it."""
    if not vipune.binary:
        raise EvalError(f"{vipune.fingerprint}: no vipune binary is configured for this build, known "
                        "here by its fingerprint id alone, so its results cannot be computed again",
                        fix="set vipune.binary to the build's path, or list its path (not its id) in "
                            "vipune.compare")
    path = resolve_binary(vipune.binary)
    return path, check_fingerprint(path, vipune.fingerprint)


def binary_fingerprint(path: Path, timeout: float, extra_files: list[Path] | None = None,
                       versions: dict[str, str] | None = None) -> dict[str, Any]:
    """sha256 of the binary's bytes (and of ``extra_files``, e.g. the build a wrapper script
    runs) plus its ``--json version``; ``id`` = version-sha12 names its results folder.

    ``versions``: what the fingerprints of this results folder say, content sha256 → version:
    a build seen before is not run again (each call costs ~0.4 s, and every cluster job parses
    the Snakefile). Else vipune runs in a throwaway HOME: parsing writes nothing anywhere."""
    sha = sha256_file(path)
    files = {str(f): sha256_file(f) for f in extra_files or []}
    content = sha if not files else hashlib.sha256(
        "\n".join([sha, *files.values()]).encode()).hexdigest()
    version = (versions or {}).get(content)
    if version is None:
        with tempfile.TemporaryDirectory(prefix="vipune-eval-version-") as home:
            version = Vipune(path, Path(home), timeout).version(f"vipune.binary {path}")
    fingerprint = {"kind": "vipune", "sha256": sha, "version": version,
                   "id": f"{version}-{content[:12]}"}
    if files:
        fingerprint["files"] = {Path(name).name: digest for name, digest in files.items()}
        fingerprint["content_sha256"] = content
    return fingerprint


def known_versions(fingerprints: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Content sha256 → version, from binary fingerprints (``binary_fingerprint``'s ``versions``)."""
    return {fp.get("content_sha256", fp["sha256"]): fp["version"] for fp in fingerprints.values()}


def check_fingerprint(binary: Path, fingerprint: Path) -> dict[str, Any]:
    """The fingerprint ``binary`` must match: results are filed under it, so the bytes must agree."""
    return check_planned_bytes(binary, fingerprint, "binary")
