"""The vipune binary: found one way, in vipune/binary.py alone (issue 36); its fingerprint
follows its bytes (and the files behind a wrapper), never its path or mtime."""

import json
import os
import re
import shutil

import pytest

from support.scenarios import REPO
from vipune_eval.core.io import sha256_file
from vipune_eval.errors import EvalError
from vipune_eval.vipune import binary
from vipune_eval.vipune.binary import binary_fingerprint, planned_binary
from vipune_eval.vipune.settings import VipuneSettings

PACKAGE = REPO / "vipune_eval"


def test_a_build_known_by_its_id_alone_is_refused_by_name(tmp_path):
    fingerprint = tmp_path / "vipune-0.20.0-abcdef012345.json"
    fingerprint.write_text(json.dumps({"kind": "vipune", "sha256": "0" * 64}))
    with pytest.raises(EvalError, match="no vipune binary is configured for this build") as info:
        planned_binary(VipuneSettings("", fingerprint, tmp_path, tmp_path / "tmp", 5.0), tmp_path / "job")
    assert str(fingerprint) in info.value.message and "vipune.compare" in info.value.fix


def test_the_planned_bytes_are_checked(fake_vipune_bin, tmp_path):
    fingerprint = tmp_path / "fp.json"
    fingerprint.write_text(json.dumps({"kind": "vipune", "sha256": "0" * 64}))
    with pytest.raises(EvalError, match="is not the binary this result belongs to"):
        planned_binary(
            VipuneSettings(str(fake_vipune_bin), fingerprint, tmp_path, tmp_path / "tmp", 5.0), tmp_path / "job"
        )
    with pytest.raises(EvalError, match="the vipune binary this job was planned for, is gone") as info:
        planned_binary(
            VipuneSettings(str(tmp_path / "gone" / "vipune"), fingerprint, tmp_path, tmp_path / "tmp", 5.0),
            tmp_path / "job",
        )
    assert "re-plans" in info.value.fix


def test_only_vipune_binary_finds_a_binary_or_checks_its_bytes():
    """One owner: a second way to find the binary (the search stage once built Path(vipune.binary)
    and skipped the check) fails here."""
    sources = {p.relative_to(PACKAGE).as_posix(): p.read_text() for p in PACKAGE.rglob("*.py")}
    assert [f for f, text in sources.items() if "shutil.which(" in text] == ["vipune/binary.py"]
    assert sorted(f for f, text in sources.items() if re.search(r"\bplanned_copy\(", text)) == [
        "core/io.py",
        "vipune/binary.py",
        "vipune/vipune_lane.py",
    ]
    assert not [f for f, text in sources.items() if re.search(r"Path\(\w+\.binary\)", text)]
    jobs = {f for f, text in sources.items() if "planned_binary(" in text} - {"vipune/binary.py"}
    assert jobs == {"stages/search/preflight.py", "stages/search/vipune.py"}


def test_the_missing_sentinel_is_typed_once():
    """binary.MISSING is the fingerprint id of a binary that is not there: the workspace, the
    rules, the manifest and the failure summary read it; none types it again."""
    files = [*PACKAGE.rglob("*.py"), *(REPO / "workflow" / "rules").glob("*.smk")]
    typed = [f.relative_to(REPO).as_posix() for f in files if re.search(r"""["']missing["']""", f.read_text())]
    assert typed == ["vipune_eval/vipune/binary.py"]


@pytest.fixture
def fake_binary(tmp_path, fake_vipune_bin):
    copy = tmp_path / "bin" / "vipune"
    copy.parent.mkdir()
    shutil.copy(fake_vipune_bin, copy)
    return copy


def test_binary_fingerprint_ignores_path_and_mtime_but_not_bytes(tmp_path, fake_binary):
    first = binary.binary_fingerprint(fake_binary, 30)
    assert first["sha256"] == sha256_file(fake_binary)
    assert first["id"] == f"{first['version']}-{first['sha256'][:12]}"
    os.utime(fake_binary, (1, 1))
    other = tmp_path / "elsewhere" / "vipune-copy"
    other.parent.mkdir()
    shutil.copy(fake_binary, other)
    assert binary.binary_fingerprint(other, 30) == first
    with fake_binary.open("a") as handle:
        handle.write("# rebuilt\n")
    assert binary.binary_fingerprint(fake_binary, 30)["id"] != first["id"]


def test_resolve_binary_explains_how_to_get_vipune(monkeypatch, fake_binary):
    monkeypatch.setenv("PATH", str(fake_binary.parent))
    assert binary.resolve_binary("vipune") == fake_binary.resolve()
    with pytest.raises(EvalError, match="cargo install vipune"):
        binary.resolve_binary("no-such-vipune")


def test_binary_that_does_not_print_version_json_is_named(tmp_path):
    liar = tmp_path / "vipune"
    liar.write_text("#!/bin/sh\necho 'vipune 0.9.1'\n")
    liar.chmod(0o755)
    with pytest.raises(EvalError, match=r"did not print vipune's version JSON.*vipune 0.9.1"):
        binary.binary_fingerprint(liar, 30)


@pytest.mark.parametrize(
    "fault, message",
    [
        (
            "version-garbage",
            r"did not print vipune's version JSON \(exit code 0 after [\d.]+ s\); "
            r"stdout: 'vipune: something went wrong \{'",
        ),
        ("version-fail", r"did not print vipune's version JSON \(exit code 1 after [\d.]+ s\).*cannot initialise"),
        ("version-hang", r"did not finish within 2 s \(vipune.timeout\) and was killed"),
    ],
)
def test_a_version_call_that_fails_says_what_it_printed_its_exit_code_and_the_wait(
    tmp_path, fake_binary, monkeypatch, fault, message
):
    """Regression: these read `MissingOutputException … vipune-missing.json` after a fixed 60 s."""
    monkeypatch.setenv("FAKE_VIPUNE_FAULT", fault)
    with pytest.raises(EvalError, match=message):
        binary.binary_fingerprint(fake_binary, 2)


def test_fingerprint_files_make_a_change_behind_a_wrapper_count(tmp_path, fake_binary):
    build = tmp_path / "build" / "vipune-real"
    build.parent.mkdir()
    build.write_bytes(b"\x7fELF version 1")
    first = binary.binary_fingerprint(fake_binary, 30, [build])
    plain = binary.binary_fingerprint(fake_binary, 30)
    assert first["sha256"] == plain["sha256"] and first["id"] != plain["id"]
    assert first["files"] == {"vipune-real": sha256_file(build)}
    build.write_bytes(b"\x7fELF version 2")  # the wrapper is unchanged; what it runs is not
    second = binary.binary_fingerprint(fake_binary, 30, [build])
    assert second["id"] != first["id"] and second["sha256"] == first["sha256"]


def test_a_version_this_folder_recorded_is_not_asked_again(tmp_path, fake_binary):
    """Parse time runs no vipune for a build whose fingerprint is here (each call costs ~0.4 s, in
    every cluster job's parse); a new build's version call writes nothing but in a throwaway HOME."""
    first = binary.binary_fingerprint(fake_binary, 30)
    liar = tmp_path / "liar"  # the same bytes would answer; a liar shows no call is made
    liar.write_text("#!/bin/sh\necho garbage\n")
    liar.chmod(0o755)
    versions = binary.known_versions({first["id"]: first, "x": {"sha256": sha256_file(liar), "version": "0.20.2"}})
    assert binary.binary_fingerprint(liar, 30, versions=versions)["id"] == f"0.20.2-{sha256_file(liar)[:12]}"
    assert binary.binary_fingerprint(fake_binary, 30, versions=versions) == first


def test_a_job_runs_a_private_copy_of_the_planned_bytes(fake_vipune_bin, tmp_path):
    fingerprint = tmp_path / "fp.json"
    fingerprint.write_text(json.dumps(binary_fingerprint(fake_vipune_bin, 30)))
    planned = planned_binary(
        VipuneSettings(str(fake_vipune_bin), fingerprint, None, tmp_path / "tmp", 5.0), tmp_path / "job"
    )
    assert planned.path == tmp_path / "job" / "vipune" and planned.shown == fake_vipune_bin.resolve()
    assert sha256_file(planned.path) == sha256_file(fake_vipune_bin) and os.access(planned.path, os.X_OK)
    rebuilt = tmp_path / "vipune"
    rebuilt.write_bytes(fake_vipune_bin.read_bytes() + b"# rebuilt\n")
    rebuilt.chmod(0o755)
    with pytest.raises(EvalError, match="is not the binary this result belongs to"):
        planned_binary(VipuneSettings(str(rebuilt), fingerprint, None, tmp_path / "tmp", 5.0), tmp_path / "job2")


def test_a_fast_build_is_known_by_the_record_build_sh_leaves_beside_bin(tmp_path):
    """build.sh --checkout DIR --fast writes build-profile.txt beside bin/; a release build none."""
    (tmp_path / "bin").mkdir()
    vipune = tmp_path / "bin" / "vipune"
    vipune.write_text("#!/bin/sh\n")
    assert binary.build_profile(vipune) is None
    (tmp_path / "build-profile.txt").write_text("fast\n")
    assert binary.build_profile(vipune) == "fast"
