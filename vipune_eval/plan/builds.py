"""The vipune builds a run evaluates, resolved once at parse time into a frozen ``Builds``.

``vipune.binary`` is the primary build; ``vipune.compare`` and ``vipune.baseline`` name more, each
a binary or the fingerprint id of one evaluated in this directory before. A binary is known by its
fingerprint (sha256 of its bytes and ``--json version``, vipune.binary), written here under
results/fingerprints/ by the run (``Builds.files``: parsing writes nothing) so that staleness follows
its bytes; the vipune-lane beside vipune.binary (vipune.vipune_lane) likewise. A vipune-lane built
alone (``build.sh --checkout DIR --lane-only``, the lib lane's loop) is a build too, known by its
vipune-lane's bytes: its own vipune-lane, with no binary, so the binary's retrievers (and their
preflight) are refused for it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vipune_eval.core import paths
from vipune_eval.core.io import read_json
from vipune_eval.errors import BinaryNotFound, EvalError
from vipune_eval.registry import retrievers
from vipune_eval.registry.lanes import BINARY, LIB
from vipune_eval.registry.retrievers import Kind
from vipune_eval.vipune import binary as vipune_binary
from vipune_eval.vipune import vipune_lane as lib_lane
from vipune_eval.vipune.lane_source import source_sha256


@dataclass(frozen=True)
class Builds:
    """The builds of one run. Nothing changes them after ``resolve``."""

    primary: str | None = None  # fingerprint id of vipune.binary (MISSING: not found); None: not used
    compared: tuple[str, ...] = ()  # fingerprint ids of vipune.compare (vipune.baseline included)
    baseline: str | None = None  # fingerprint id of vipune.baseline
    paths: dict[str, str] = field(default_factory=dict)  # id → path of a build that runs here now
    fingerprints: dict[str, dict[str, Any]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # id → where it came from, in words
    notes: tuple[str, ...] = ()  # printed at parse time: what was dropped
    lane: str | None = None  # fingerprint id of the vipune-lane beside vipune.binary
    lanes: dict[str, str] = field(
        default_factory=dict
    )  # build id → its vipune-lane's id (the lib lane compares builds)
    lane_paths: dict[str, str] = field(default_factory=dict)  # lane id → where it is, for a lane that runs here now
    files: dict[str, Any] = field(default_factory=dict)  # fingerprint file → its content, for the run to write

    def fingerprint_file(self, build: str) -> str:
        """Where a build's fingerprint is: a lane built alone is known by its vipune-lane's."""
        if self.fingerprints.get(build, {}).get("lane_only"):
            return paths.lane_fingerprint_file(build)
        return paths.binary_fingerprint_file(build)

    @property
    def lane_builds(self) -> dict[str, str]:
        """Lane id → the id of the build it belongs to."""
        return {lane: build for build, lane in self.lanes.items()}

    @property
    def evaluated(self) -> list[str]:
        """vipune.binary's id (when found or missing) and every compared build's."""
        return ([self.primary] if self.primary else []) + list(self.compared)


def _fingerprint_files(config: dict[str, Any]) -> list[Path]:
    """vipune.fingerprint_files: what a wrapper script named as vipune.binary runs."""
    return [Path(os.path.expanduser(f)).resolve() for f in config["vipune"]["fingerprint_files"]]


def _binary(binary: str, config: dict[str, Any], files: dict[str, Any]) -> dict[str, Any]:
    """A binary's fingerprint (its file put in ``files``) and its path."""
    path = vipune_binary.resolve_binary(binary)
    if lib_lane.is_lane(path):  # build.sh --lane-only: the vipune-lane is the build
        fingerprint = lib_lane.lane_only_fingerprint(path, config["vipune"]["timeout"])
        files[paths.lane_fingerprint_file(fingerprint["id"])] = fingerprint
        return {**fingerprint, "path": str(path)}
    extra = _fingerprint_files(config)
    missing = [str(f) for f in extra if not f.is_file()]
    if missing:
        raise EvalError(
            f"vipune.fingerprint_files: {', '.join(missing)} not found",
            fix="list only files that exist (the build a wrapper script runs), or none",
        )
    fingerprint = vipune_binary.binary_fingerprint(
        path, config["vipune"]["timeout"], extra, vipune_binary.known_versions(paths.fingerprinted_binaries())
    )
    fingerprint_file = paths.binary_fingerprint_file(fingerprint["id"])
    files[fingerprint_file] = fingerprint
    if extra:  # where they are, for the jobs to check them (binary.PlannedBinary.check_wrapped)
        files[str(vipune_binary.wrapped_record(Path(fingerprint_file)))] = {
            "files": {str(f): fingerprint["files"][f.name] for f in extra}
        }
    return {**fingerprint, "path": str(path)}


def _source(key: str, entry: str, build: dict[str, Any]) -> str:
    """Where a build came from, for the report: the config entry and the file it named."""
    if "path" not in build:
        return f"{key} {entry!r}: evaluated in this directory before"
    moved = vipune_binary.lock_deviations(Path(build["path"]))
    profile = vipune_binary.build_profile(Path(build["path"]))
    return (
        f"{key} {entry!r}"
        + (f" = {build['path']}" if build["path"] != entry else "")
        + (f", built with its Cargo.lock moved where the registry lacks a pin ({', '.join(moved)})" if moved else "")
        + (
            f", a {profile} build (cargo profile {profile}, not vipune's release profile: other bytes than "
            "a release build's, the same rankings)"
            if profile
            else ""
        )
    )


def _build(entry: str, config: dict[str, Any], files: dict[str, Any]) -> dict[str, Any]:
    """A vipune.compare entry: the fingerprint id of a build evaluated here before, or a binary."""
    known = paths.fingerprinted_binaries()
    if entry in known:
        return known[entry]
    try:
        return _binary(entry, config, files)
    except BinaryNotFound:
        raise EvalError(
            f"vipune.compare entry {entry!r} is neither an executable vipune nor the fingerprint "
            f"of a binary evaluated in this directory (known: {', '.join(sorted(known)) or 'none'})",
            fix="give the build's path, or the id of one this directory evaluated before",
        ) from None


def _lane(
    build: dict[str, Any] | None, config: dict[str, Any], files: dict[str, Any], wrapper: bool = False
) -> tuple[str, str]:
    """(fingerprint id, path) of the vipune-lane beside a build's binary, or, for vipune.binary
    (``wrapper``), beside one of vipune.fingerprint_files where it is a wrapper script (refused,
    with the command that builds it, when it is not there); MISSING with vipune.binary, which the
    vipune_binary rule names. A build known by its id alone: the vipune-lane of this checkout's lane/
    sources evaluated beside it here before (no path: its results are not computed again)."""
    if build is None:
        return vipune_binary.MISSING, ""
    if build.get("lane_only"):
        return build["id"], build.get("path", "")
    if "path" not in build:
        known = paths.fingerprinted_lanes(build["id"], source_sha256())
        if not known:
            raise EvalError(
                f"build {build['id']} (known by its id alone) has no vipune-lib results in this "
                "directory from this checkout's lane/ sources, and the vipune-lib retrievers compare "
                "builds by them",
                fix="list the build by its path in vipune.compare (build.sh builds its vipune-lane beside it)",
            )
        return known[0]["id"], ""
    path = lib_lane.find_lane(Path(build["path"]), build["version"], _fingerprint_files(config) if wrapper else [])
    fingerprint = lib_lane.lane_fingerprint(path, build, config["vipune"]["timeout"])
    files[paths.lane_fingerprint_file(fingerprint["id"])] = fingerprint
    return fingerprint["id"], str(path)


def compared_on(specs: list[retrievers.Spec]) -> Kind | None:
    """Which of vipune's ways compares the builds of vipune.compare: the binary's hybrid search
    where it is configured, else the lib lane's (the maintainer's loop: a checkout's vipune-lib
    against a release's, no model), else none."""
    names = {s.name for s in specs}
    if BINARY.hybrid in names:
        return Kind.VIPUNE
    if LIB.hybrid in names:
        return Kind.LIB
    return None


def resolve(config: dict[str, Any], specs: list[retrievers.Spec]) -> Builds:
    """The builds ``config`` names, fingerprinted (none when no retriever runs vipune's code).

    A missing vipune.binary is reported by the vipune_binary rule, so dry runs and --lint still
    work; a binary that is there but does not answer stops the run here, saying why."""
    if not retrievers.uses_binary(specs):
        return Builds()
    vipune = config["vipune"]
    files: dict[str, Any] = {}
    try:
        primary = _binary(vipune["binary"], config, files)
    except BinaryNotFound:
        primary = None
    primary_id = primary["id"] if primary else vipune_binary.MISSING
    compared: list[str] = []
    baseline = None
    found: dict[str, str] = {}
    fingerprints: dict[str, dict[str, Any]] = {}
    sources: dict[str, str] = {}
    notes: list[str] = []
    if primary:
        found[primary_id], fingerprints[primary_id] = primary["path"], primary
        sources[primary_id] = _source("vipune.binary", vipune["binary"], primary)
    for entry in [*vipune["compare"], *([vipune["baseline"]] if vipune["baseline"] else [])]:
        build = _build(entry, config, files)
        key = "vipune.baseline" if entry == vipune["baseline"] else "vipune.compare"
        if key == "vipune.baseline":
            baseline = build["id"]
        if build["id"] == primary_id:
            notes.append(
                f"{key}{' entry' if key == 'vipune.compare' else ''} {entry!r} is vipune.binary itself "
                f"({build['id']}); dropped: every build is compared with vipune.binary"
            )
        elif build["id"] not in compared:
            compared.append(build["id"])
            sources[build["id"]] = _source(key, entry, build)
        fingerprints[build["id"]] = build
        if "path" in build:
            found[build["id"]] = build["path"]
    lanes: dict[str, str] = {}
    lane_paths: dict[str, str] = {}
    if any(s.kind is Kind.LIB for s in specs):
        lanes[primary_id], path = _lane(primary, config, files, wrapper=True)
        lane_paths[lanes[primary_id]] = path
        for build_id in compared if compared_on(specs) is Kind.LIB else []:
            lanes[build_id], path = _lane(fingerprints[build_id], config, files)
            lane_paths[lanes[build_id]] = path
    refuse_lanes_alone(fingerprints, primary_id, compared, specs)
    builds = Builds(
        primary_id,
        tuple(compared),
        baseline,
        found,
        fingerprints,
        sources,
        tuple(notes),
        lanes.get(primary_id),
        lanes,
        {k: v for k, v in lane_paths.items() if v},
        files,
    )
    if vipune["preflight"] == "enforce":
        refuse_recorded_failures(builds)
    return builds


def refuse_lanes_alone(
    fingerprints: dict[str, dict[str, Any]], primary: str, compared: list[str], specs: list[retrievers.Spec]
) -> None:
    """A vipune-lane built alone has no binary: refused where a retriever runs vipune.binary (the
    binary's searches, their preflight), or where vipune.compare's builds are compared on the binary."""
    binary_runs = [s.name for s in specs if s.kind is Kind.VIPUNE]
    needing = [primary] if binary_runs else []
    needing += compared if compared_on(specs) is Kind.VIPUNE else []
    alone = [b for b in needing if fingerprints.get(b, {}).get("lane_only")]
    if alone:
        named = ", ".join(f"{b} ({fingerprints[b].get('path', 'evaluated before')})" for b in alone)
        raise EvalError(
            f"{named}: a vipune-lane built alone (build.sh --lane-only) has no vipune binary, and "
            f"{', '.join(binary_runs)} run the binary",
            fix="build the binary too (`.ci/vipune/build.sh --checkout DIR --fast`, without --lane-only) "
            "and name it, or run the lib lane alone: retrievers [vipune-lib, vipune-lib-semantic]",
        )


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
            "named in the report; or drop them from vipune.compare",
        )
