"""A bad config stops the Snakemake run before any job, every problem in one message and the fix
last (the checks themselves: tests/unit/plan/test_config_check.py)."""

import os
import subprocess
import sys

from support.scenarios import REPO


def test_bad_values_stop_the_run_before_any_job(tmp_path):
    (tmp_path / "bad.yaml").write_text("granularities: [turn]\nsplit: {dev_fraction: .nan}\ngranularity: [session]\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(REPO / "workflow" / "Snakefile"),
            "--cores",
            "1",
            "--configfile",
            "bad.yaml",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    start = lines.index("vipune-eval: bad configuration, 3 problems:")
    assert lines[start + 1 :] == [
        "  - granularities ['turn'] has no session: session is required (the primary result, the one the "
        "others are compared with); use ['session', 'turn']",
        "  - split.dev_fraction must be a number from 0 to 1, got nan",
        "  - granularity: not a config key; did you mean granularities?",
        "vipune-eval: fix: fix these keys in your config file (every key: docs/configuration.md); "
        "rename granularity → granularities",
    ], proc.stderr
    assert "does not contain items" not in proc.stderr and "Failed validating" not in proc.stderr
    assert not (tmp_path / "results" / "logs").exists()


def test_a_float_setting_and_a_key_given_twice_stop_the_run_named_not_a_traceback(tmp_path):
    """Issue 51 item 5: `search={shards: 8.0}` was a TypeError traceback at parse time, and a second
    `search:` block of a config file silently dropped the first."""
    (tmp_path / "twice.yaml").write_text("search: {threads: 1}\nks: [1, 5]\nsearch: {row_limit: 900}\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(REPO / "workflow" / "Snakefile"),
            "--cores",
            "1",
            "-n",
            "--configfile",
            "twice.yaml",
            "--config",
            "search={shards: 8.0}",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "TypeError" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    start = lines.index("vipune-eval: bad configuration, 2 problems:")
    assert lines[start + 1 : start + 3] == [
        f"  - {tmp_path / 'twice.yaml'}:3: search is given twice (also at line 1): YAML keeps the last and "
        "silently drops the first; merge the two into one",
        "  - search.shards: 8.0 is not a whole number: an integer setting takes no decimal point (write 8)",
    ], proc.stderr
