"""The vipune builds a run evaluates, resolved once at parse time into a frozen ``Builds``.

``vipune.binary`` is the primary build; ``vipune.compare`` and ``vipune.baseline`` name more, each
a binary or the fingerprint id of one evaluated in this directory before. A binary is known by its
fingerprint (sha256 of its bytes and ``--json version``, vipune.binary), written here under
results/fingerprints/ so that staleness follows its bytes; the vipune-lane beside vipune.binary
(vipune.lane) likewise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vipune_eval.core import paths
from vipune_eval.core.io import read_json, write_json_if_changed
from vipune_eval.errors import BinaryNotFound, EvalError
from vipune_eval.registry import retrievers
from vipune_eval.registry.retrievers import Kind
from vipune_eval.vipune import binary as vipune_binary
from vipune_eval.vipune import lane as lib_lane


@dataclass(frozen=True)
class Builds:
    """The builds of one run. Nothing changes them after ``resolve``."""

    primary: str | None = None  # fingerprint id of vipune.binary (MISSING: not found); None: not used
    compared: tuple[str, ...] = ()  # fingerprint ids of vipune.compare (vipune.baseline included)
    baseline: str | None = None  # fingerprint id of vipune.baseline
    paths: dict[str, str] = field(default_factory=dict)  # id → path of a build that runs here now
    fingerprints: dict[str, dict] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # id → where it came from, in words
    notes: tuple[str, ...] = ()  # printed at parse time: what was dropped
    lane: str | None = None  # fingerprint id of the vipune-lane beside vipune.binary
    lane_path: str = ""  # where that lane is ("" when vipune.binary is missing)

    @property
    def evaluated(self) -> list[str]:
        """vipune.binary's id (when found or missing) and every compared build's."""
        return ([self.primary] if self.primary else []) + list(self.compared)


def _binary(binary: str, config: dict[str, Any]) -> dict[str, Any]:
    path = vipune_binary.resolve_binary(binary)
    extra = [Path(os.path.expanduser(f)).resolve() for f in config["vipune"]["fingerprint_files"]]
    missing = [str(f) for f in extra if not f.is_file()]
    if missing:
        raise EvalError(f"vipune.fingerprint_files: {', '.join(missing)} not found",
                        fix="list only files that exist (the build a wrapper script runs), or none")
    cache = Path(paths.CACHE)
    fingerprint = vipune_binary.binary_fingerprint(path, cache / "vipune-home", config["vipune"]["timeout"],
                                                   cache, extra)
    write_json_if_changed(paths.binary_fingerprint_file(fingerprint["id"]), fingerprint)
    return {**fingerprint, "path": str(path)}


def _source(key: str, entry: str, build: dict[str, Any]) -> str:
    """Where a build came from, for the report: the config entry and the file it named."""
    if "path" not in build:
        return f"{key} {entry!r}: evaluated in this directory before"
    moved = vipune_binary.lock_deviations(Path(build["path"]))
    return (f"{key} {entry!r}" + (f" = {build['path']}" if build["path"] != entry else "")
            + (f", built with its Cargo.lock moved where the registry lacks a pin ({', '.join(moved)})"
               if moved else ""))


def _build(entry: str, config: dict[str, Any]) -> dict[str, Any]:
    """A vipune.compare entry: the fingerprint id of a build evaluated here before, or a binary."""
    known = paths.fingerprinted_binaries()
    if entry in known:
        return known[entry]
    try:
        return _binary(entry, config)
    except BinaryNotFound:
        raise EvalError(
            f"vipune.compare entry {entry!r} is neither an executable vipune nor the fingerprint "
            f"of a binary evaluated in this directory (known: {', '.join(sorted(known)) or 'none'})",
            fix="give the build's path, or the id of one this directory evaluated before") from None


def _lane(primary: dict[str, Any] | None, config: dict[str, Any]) -> tuple[str, str]:
    """(fingerprint id, path) of the vipune-lane beside vipune.binary (refused, with the command
    that builds it, when it is not there); MISSING with the binary, which the vipune_binary
    rule names."""
    if primary is None:
        return vipune_binary.MISSING, ""
    path = lib_lane.find_lane(Path(primary["path"]), primary["version"])
    fingerprint = lib_lane.lane_fingerprint(path, primary, config["vipune"]["timeout"])
    write_json_if_changed(paths.lane_fingerprint_file(fingerprint["id"]), fingerprint)
    return fingerprint["id"], str(path)


def resolve(config: dict[str, Any], specs: list[retrievers.Spec]) -> Builds:
    """The builds ``config`` names, fingerprinted (none when no retriever runs vipune's code).

    A missing vipune.binary is reported by the vipune_binary rule, so dry runs and --lint still
    work; a binary that is there but does not answer stops the run here, saying why."""
    if not retrievers.uses_binary(specs):
        return Builds()
    vipune = config["vipune"]
    try:
        primary = _binary(vipune["binary"], config)
    except BinaryNotFound:
        primary = None
    primary_id = primary["id"] if primary else vipune_binary.MISSING
    compared: list[str] = []
    baseline = None
    found: dict[str, str] = {}
    fingerprints: dict[str, dict] = {}
    sources: dict[str, str] = {}
    notes: list[str] = []
    if primary:
        found[primary_id], fingerprints[primary_id] = primary["path"], primary
        sources[primary_id] = _source("vipune.binary", vipune["binary"], primary)
    for entry in [*vipune["compare"], *([vipune["baseline"]] if vipune["baseline"] else [])]:
        build = _build(entry, config)
        key = "vipune.baseline" if entry == vipune["baseline"] else "vipune.compare"
        if key == "vipune.baseline":
            baseline = build["id"]
        if build["id"] == primary_id:
            notes.append(f"{key}{' entry' if key == 'vipune.compare' else ''} {entry!r} is vipune.binary itself "
                         f"({build['id']}); dropped: every build is compared with vipune.binary")
        elif build["id"] not in compared:
            compared.append(build["id"])
            sources[build["id"]] = _source(key, entry, build)
        fingerprints[build["id"]] = build
        if "path" in build:
            found[build["id"]] = build["path"]
    lane, lane_path = (_lane(primary, config) if any(s.kind is Kind.LIB for s in specs) else (None, ""))
    builds = Builds(primary_id, tuple(compared), baseline, found, fingerprints, sources, tuple(notes),
                    lane, lane_path)
    if vipune["preflight"] == "enforce":
        refuse_recorded_failures(builds)
    return builds


def refuse_recorded_failures(builds: Builds) -> None:
    """``vipune.preflight`` is not a parameter of the preflight or the searches (both modes run
    the same checks; enforce stops at the first failure), so switching it reruns nothing. Enforce
    still holds for a build whose failed checks were recorded under ``record``: it is refused
    here, before any job, as its preflight job would have been."""
    refused = []
    for build in builds.evaluated:
        path = Path(paths.preflight(build))
        found = read_json(path) if path.exists() else {}
        if found.get("failed_checks"):
            refused.append(f"{build} ({'; '.join(found.get('drift') or found['failed_checks'])})")
    if refused:
        raise EvalError(
            f"vipune.preflight is enforce, and the preflight of {', '.join(refused)} failed (recorded "
            "under vipune.preflight: record)",
            fix="set vipune.preflight: record to evaluate these builds anyway, their failed checks "
                "named in the report; or drop them from vipune.compare")
