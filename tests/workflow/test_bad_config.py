"""A bad config stops the Snakemake run before any job, every problem in one message and the fix
last (the checks themselves: tests/unit/plan/test_config_check.py)."""

import os
import subprocess
import sys

from support.scenarios import REPO


def test_bad_values_stop_the_run_before_any_job(tmp_path):
    (tmp_path / "bad.yaml").write_text("granularities: [turn]\nsplit: {dev_fraction: .nan}\ngranularity: [session]\n")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "workflow" / "Snakefile"),
                           "--cores", "1", "--configfile", "bad.yaml"], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    start = lines.index("vipune-eval: bad configuration, 3 problems:")
    assert lines[start + 1:] == [
        "  - granularities ['turn'] has no session: session is required (the primary result, the one the "
        "others are compared with); use ['session', 'turn']",
        "  - split.dev_fraction must be a number from 0 to 1, got nan",
        "  - granularity: not a config key; did you mean granularities?",
        "vipune-eval: fix: fix these keys in your config file (every key: docs/configuration.md); "
        "rename granularity → granularities"], proc.stderr
    assert "does not contain items" not in proc.stderr and "Failed validating" not in proc.stderr
    assert not (tmp_path / "results" / "logs").exists()
