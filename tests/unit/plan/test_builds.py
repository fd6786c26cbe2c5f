"""The builds a run evaluates, resolved once at parse time (plan.builds, through prepare)."""

import copy
import dataclasses
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from support.config import SCHEMA, local_config
from support.fakes import fake_build, fake_lane_only
from vipune_eval.core import paths
from vipune_eval.errors import EvalError
from vipune_eval.plan import planned_file, workspace
from vipune_eval.vipune.binary import wrapped_record


def test_naming_the_main_binary_again_in_compare_is_dropped_with_a_note(tmp_path, monkeypatch):
    binary = fake_build(tmp_path)[0]
    monkeypatch.chdir(tmp_path)
    cfg = local_config(tmp_path, binary=str(binary), compare=[str(binary)])
    builds = workspace.prepare(cfg, SCHEMA).builds
    assert builds.compared == () and builds.primary and len(builds.notes) == 1
    assert builds.notes[0].startswith(f"vipune.compare entry '{binary}' is vipune.binary itself ({builds.primary})")
    assert "dropped" in builds.notes[0]
    cfg["vipune"]["compare"] = []
    assert workspace.prepare(cfg, SCHEMA).builds.notes == ()


def test_a_build_whose_lock_was_moved_says_so_where_it_came_from(tmp_path, monkeypatch):
    """build.sh records the crates it moved off a Cargo.lock the registry cannot honour beside bin/
    (issue 38); the report's build row ("from") names them."""
    binary = fake_build(tmp_path / "build")[0]
    (tmp_path / "build" / "lock-deviations.txt").write_text(
        "    Updating crates.io index\n Downgrading webpki-roots v1.0.11 -> v1.0.10\n"
    )
    monkeypatch.chdir(tmp_path)
    cfg = local_config(tmp_path, binary=str(binary))
    builds = workspace.prepare(cfg, SCHEMA).builds
    assert builds.sources[builds.primary].endswith(
        "built with its Cargo.lock moved where the registry lacks a pin (webpki-roots 1.0.11 → 1.0.10)"
    )
    (tmp_path / "build" / "lock-deviations.txt").unlink()
    assert "Cargo.lock" not in workspace.prepare(cfg, SCHEMA).builds.sources[builds.primary]


def test_a_prepared_workspace_cannot_be_changed(tmp_path, monkeypatch):
    """prepare resolves everything once: the Workspace and its Builds are frozen."""
    binary = fake_build(tmp_path)[0]
    monkeypatch.chdir(tmp_path)
    ws = workspace.prepare(local_config(tmp_path, binary=str(binary)), SCHEMA)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ws.builds = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        ws.builds.primary = "missing"


@pytest.mark.parametrize("beside", [False, True], ids=["own-folder", "in-the-build"])
def test_a_wrapper_script_finds_and_checks_the_lane_of_the_build_it_runs_through_fingerprint_files(
    any_lane, tmp_path, monkeypatch, beside
):
    """Issue 44 item 6: vipune.binary a wrapper script (docs/configuration.md), its build in
    vipune.fingerprint_files: the vipune-lane is looked for beside each of them and checked against
    their bytes (a wrapper in the build's folder finds the vipune-lane beside itself, built beside the
    binary, not the wrapper); without fingerprint_files the error says to list the build there."""
    binary, lane = any_lane
    if beside:  # a copy of the build, the wrapper put into its bin/
        build = tmp_path / "build" / "bin"
        build.mkdir(parents=True)
        for built in (binary, lane):
            shutil.copy2(built, build / built.name)
        binary = build / binary.name
    wrapper = (binary.parent if beside else tmp_path) / "vipune-wrapper"
    wrapper.write_text(f'#!/bin/sh\nexec "{binary}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    cfg = local_config(tmp_path, binary=str(wrapper))
    with pytest.raises(EvalError) as caught:
        workspace.prepare(copy.deepcopy(cfg), SCHEMA)
    assert "vipune.fingerprint_files" in caught.value.fix
    cfg["vipune"]["fingerprint_files"] = [str(binary)]
    ws = workspace.prepare(cfg, SCHEMA)
    builds = ws.builds
    assert builds.lane_paths[builds.lane] == str(binary.resolve().parent / lane.name)  # bin/ may be a link
    assert builds.fingerprints[builds.primary]["files"] == {
        binary.name: hashlib.sha256(binary.read_bytes()).hexdigest()
    }
    # where they are, planned beside the fingerprint (no path in it), for the jobs to check them
    # (issue 51 item 1); parsing writes nothing (issue 53): a real run's planned_file job writes it
    record = ws.files[str(wrapped_record(Path(paths.binary_fingerprint_file(builds.primary))))]
    assert record == {"files": {str(binary.resolve()): hashlib.sha256(binary.read_bytes()).hexdigest()}}


def test_a_lane_that_compiled_another_source_than_its_binarys_is_refused_naming_both(tmp_path, monkeypatch):
    """Issue 51 item 2: the vipune-lane records the sha256 of the vipune source it compiled, build.sh the
    binary's in build.json beside bin/; a pair whose digests differ (cargo reused code compiled
    from other bytes, or a lane moved beside another build) is refused before any job."""
    lane_source, binary_source = "a" * 64, "b" * 64
    binary, lane = fake_build(tmp_path / "build", preamble=f"export FAKE_LANE_SOURCE_SHA256={lane_source}\n")
    sha = hashlib.sha256(binary.read_bytes()).hexdigest()
    monkeypatch.chdir(tmp_path)
    cfg = local_config(tmp_path, binary=str(binary))
    cfg["retrievers"] = ["vipune-lib"]
    record = tmp_path / "build" / "build.json"
    workspace.prepare(copy.deepcopy(cfg), SCHEMA)  # no record (bin/ copied without it): not checked
    record.write_text(json.dumps({"binary_sha256": "c" * 64, "vipune_source_sha256": lane_source}))
    with pytest.raises(EvalError, match=r"is not the binary .*build.json records: the vipune-lane's search code"):
        workspace.prepare(copy.deepcopy(cfg), SCHEMA)
    record.write_text(json.dumps({"binary_sha256": sha, "vipune_source_sha256": binary_source}))
    with pytest.raises(EvalError) as caught:
        workspace.prepare(copy.deepcopy(cfg), SCHEMA)
    assert re.search(
        rf"{lane.name} compiled the vipune source with sha256 aaaaaaaaaaaa, but the binary it was "
        rf"built beside \(sha256 {sha[:12]}\) was built from the source with sha256 bbbbbbbbbbbb",
        caught.value.message,
    )
    assert "build both again" in caught.value.fix
    record.write_text(json.dumps({"binary_sha256": sha, "vipune_source_sha256": lane_source}))
    builds = workspace.prepare(copy.deepcopy(cfg), SCHEMA).builds
    assert builds.lane_paths[builds.lane] == str(lane.resolve())


# ---------------------------------------------------------------- a lane built alone (issue 54 item 2)


def test_a_lane_built_alone_is_a_build_of_its_own_for_the_lib_lane(tmp_path, monkeypatch):
    """build.sh --lane-only prints the vipune-lane: as vipune.binary it is the primary build, known by the
    vipune-lane's bytes (its own lane, no binary), its fingerprint the vipune-lane's; as a vipune.compare entry
    likewise, and by its id once evaluated here."""
    lane = fake_lane_only(tmp_path / "checkout")
    release = fake_build(tmp_path / "release", preamble="# the release\n")[0]
    monkeypatch.chdir(tmp_path)
    lib = ["vipune-lib", "vipune-lib-semantic"]
    cfg = local_config(tmp_path, binary=str(lane), compare=[str(release)])
    cfg["retrievers"] = lib
    ws = workspace.prepare(copy.deepcopy(cfg), SCHEMA)
    builds = ws.builds
    primary = builds.fingerprints[builds.primary]
    assert primary["lane_only"] and primary["sha256"] == hashlib.sha256(lane.read_bytes()).hexdigest()
    assert (
        builds.primary == f"{primary['version']}-{primary['sha256'][:12]}" and primary["built"]["binary_sha256"] is None
    )
    assert builds.lanes[builds.primary] == builds.primary and builds.lane_paths[builds.primary] == str(lane.resolve())
    assert builds.fingerprint_file(builds.primary) == paths.lane_fingerprint_file(builds.primary)
    # planned for the run to write (a NameError at parse before: the planning found by mypy, issue 53)
    assert ws.files[builds.fingerprint_file(builds.primary)]["lane_only"]
    assert not Path(builds.fingerprint_file(builds.primary)).exists()  # parsing writes nothing
    [compared] = builds.compared
    assert builds.fingerprint_file(compared) == paths.binary_fingerprint_file(compared)  # a binary's build
    # the lane-only build compared with the release by its id, once evaluated here (the run wrote its fingerprint)
    for path, text in planned_file.texts(ws.files).items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text, encoding="utf-8")
    again = copy.deepcopy(cfg)
    again["vipune"].update(binary=str(release), compare=[builds.primary])
    assert workspace.prepare(again, SCHEMA).builds.compared == (builds.primary,)


@pytest.mark.parametrize("role", ["binary", "compare"])
def test_a_lane_built_alone_is_refused_where_a_run_needs_the_binary(tmp_path, monkeypatch, role):
    lane = fake_lane_only(tmp_path / "checkout")
    release = fake_build(tmp_path / "release")[0]
    monkeypatch.chdir(tmp_path)
    vipune = {"binary": str(lane)} if role == "binary" else {"binary": str(release), "compare": [str(lane)]}
    cfg = local_config(tmp_path, **vipune)
    cfg["retrievers"] = ["vipune", "vipune-lib"]  # the binary's searches (and preflight) for vipune.binary
    with pytest.raises(EvalError) as caught:
        workspace.prepare(cfg, SCHEMA)
    assert (
        "a vipune-lane built alone (build.sh --lane-only) has no vipune binary, and vipune run the binary"
        in caught.value.message
    )
    assert "without --lane-only" in caught.value.fix


def test_a_lane_built_beside_a_binary_is_not_a_build_of_its_own(tmp_path, monkeypatch):
    binary, lane = fake_build(tmp_path / "build")
    monkeypatch.chdir(tmp_path)
    cfg = local_config(tmp_path, binary=str(lane))
    cfg["retrievers"] = ["vipune-lib"]
    with pytest.raises(EvalError) as caught:
        workspace.prepare(cfg, SCHEMA)
    assert "was built beside a vipune binary" in caught.value.message and str(binary) in caught.value.fix
