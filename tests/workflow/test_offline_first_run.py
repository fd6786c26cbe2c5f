"""A newcomer's offline first run through the Snakemake CLI names every fix in its last lines
(the failure summary itself: tests/unit/plan/test_failures.py)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.scenarios import REPO


def _path_without_vipune(venv_bin: Path) -> str:
    dirs = [str(venv_bin)] + [
        d for d in os.environ["PATH"].split(os.pathsep) if d and not (Path(d) / "vipune").exists()
    ]
    return os.pathsep.join(dict.fromkeys(dirs))


@pytest.mark.parametrize("cores", ["8", "1"])  # the README's command; one core: only one job starts
def test_an_offline_first_run_names_all_three_fixes_in_its_last_lines(tmp_path, cores):
    """A newcomer's first run: repository defaults, no dataset, no model, no network, no vipune."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PATH": _path_without_vipune(Path(sys.executable).parent)}
    assert shutil.which("vipune", path=env["PATH"]) is None
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "workflow" / "Snakefile"), "--cores", cores],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    lines = proc.stderr.rstrip("\n").splitlines()
    last = lines[-8:]
    text = "\n".join(last)
    trailer = max(i for i, line in enumerate(lines) if "did not complete successfully" in line)
    assert lines[trailer + 1].startswith("vipune-eval: 3 job(s) failed"), text  # after Snakemake's own lines
    fixes = [line for line in last if line.startswith("    fix: ")]
    assert len(fixes) == 3, text
    assert "dataset.path" in fixes[0] and "model.path" in fixes[1], text
    assert "build vipune and its vipune-lane" in fixes[2] and "set vipune.binary" in fixes[2], text
    assert [line.split()[0] for line in last if line.startswith("  ") and not line.startswith("    ")] == [
        "download_dataset",
        "download_model",
        "vipune_binary",
    ], text  # by rule
