"""The .test scenario as the Workflow Catalog and CI run it: `snakemake --directory .test --cores 2`
from the repository's root, no other flag, offline and with no vipune anywhere (issue 53). Snakemake
finds workflow/Snakefile and its default profile by itself; the working directory's
config/config.yaml is read over the repository's. (Its shipped inputs: tests/project/test_catalog.py.)"""

import json
import os
import shutil
import subprocess
import sys

from support.scenarios import REPO


def test_the_dot_test_scenario_runs_from_the_root_with_no_flag(tmp_path):
    root = tmp_path / "clone"  # a copy, so that the run's files stay out of the repository
    for part in ("workflow", "config", "vipune_eval", "lane", ".test"):
        shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("__pycache__", "results", ".snakemake"))
    path = os.pathsep.join([os.path.dirname(sys.executable), "/usr/bin", "/bin"])
    assert shutil.which("vipune", path=path) is None
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--directory", ".test", "--cores", "2"],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PATH": path, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Using workflow specific profile workflow/profiles/default" in proc.stderr
    report = json.loads((root / ".test" / "results" / "report.json").read_text())
    assert report["pairs"] == 5 and set(report["retrievers"]) == {"dense", "bm25", "bm25-or", "hybrid", "hybrid-or"}
    assert (root / ".test" / "results" / "report.html").is_file() and not (root / "results").exists()
