"""The vipune binary: found one way, in vipune/binary.py alone (issue 36)."""

import json
import re
from pathlib import Path

import pytest

from support.scenarios import REPO
from vipune_eval.errors import EvalError
from vipune_eval.vipune.binary import planned_binary
from vipune_eval.vipune.client import VipuneSettings

PACKAGE = REPO / "vipune_eval"


def test_a_build_known_by_its_id_alone_is_refused_by_name(tmp_path):
    fingerprint = tmp_path / "vipune-0.20.0-abcdef012345.json"
    fingerprint.write_text(json.dumps({"kind": "vipune", "sha256": "0" * 64}))
    with pytest.raises(EvalError, match="no vipune binary is configured for this build") as info:
        planned_binary(VipuneSettings("", fingerprint, tmp_path, tmp_path / "tmp", 5.0))
    assert str(fingerprint) in info.value.message and "vipune.compare" in info.value.fix


def test_the_planned_bytes_are_checked(fake_vipune_bin, tmp_path):
    fingerprint = tmp_path / "fp.json"
    fingerprint.write_text(json.dumps({"kind": "vipune", "sha256": "0" * 64}))
    with pytest.raises(EvalError, match="is not the binary this result belongs to"):
        planned_binary(VipuneSettings(str(fake_vipune_bin), fingerprint, tmp_path, tmp_path / "tmp", 5.0))


def test_only_vipune_binary_finds_a_binary_or_checks_its_bytes():
    """One owner: a second way to find the binary (the search stage once built Path(vipune.binary)
    and skipped the check) fails here."""
    sources = {p.relative_to(PACKAGE).as_posix(): p.read_text() for p in PACKAGE.rglob("*.py")}
    assert [f for f, text in sources.items() if "shutil.which(" in text] == ["vipune/binary.py"]
    assert [f for f, text in sources.items() if re.search(r"\bcheck_fingerprint\(", text)] == ["vipune/binary.py"]
    assert not [f for f, text in sources.items() if re.search(r"Path\(\w+\.binary\)", text)]
    jobs = {f for f, text in sources.items() if "planned_binary(" in text} - {"vipune/binary.py"}
    assert jobs == {"stages/search/preflight.py", "stages/search/vipune_lane.py"}
