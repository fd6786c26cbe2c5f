"""The holes break-it sessions found (issues 10, 32, 39), each through the Snakemake CLI: no run
ends with a complete-looking wrong report, and every failure says what happened (vipune's own
faults: test_vipune_faults.py; paths with spaces and odd question ids: test_cold_small_run.py)."""

import json
from pathlib import Path

import pytest

from support.results import report
from support.scenarios import clone, make_workdir, set_config, snakemake

pytestmark = pytest.mark.slow


def test_more_search_shards_than_pairs_gives_empty_shards(small_run, workflow_env, tmp_path):
    workdir = clone(small_run, tmp_path / "w")
    set_config(workdir, search={"shards": 8, "threads": 1})
    snakemake(workdir, "--cores", "2", env=workflow_env)
    assert report(workdir)["pairs"] == 5
    empty = workdir / "results/search/dense/shard-7-of-8.run"
    assert empty.exists() and empty.read_text() == ""


def test_a_failed_run_says_the_report_left_is_the_previous_ones(small, small_run, workflow_env, tmp_path):
    workdir = clone(small_run, tmp_path / "w")
    assert (workdir / "results/report.json").exists()
    bad = json.loads(Path(small[0]).read_text())
    bad[1]["haystack_dates"] = 5
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    config = (workdir / "config.yaml").read_text().replace(str(small[0]), str(tmp_path / "bad.json"))
    (workdir / "config.yaml").write_text(config)
    proc = snakemake(workdir, "--cores", "2", env=workflow_env, check=False)
    assert proc.returncode != 0
    assert "this run failed; results/report.json is the previous run's report" in proc.stderr
    assert "field 'haystack_dates' should be a list" in proc.stdout + proc.stderr


# ---------------------------------------------------------------- issue 32


def test_a_whatif_lab_with_no_dev_pairs_completes_saying_nothing_can_be_chosen(small_run, workflow_env, tmp_path):
    """Item 2: the default dev_fraction 0.2 leaves ``small``'s 5 pairs (one or two per category)
    all on test: the report said nothing (a TypeError in whatif.verdict deleted its outputs)."""
    workdir = clone(small_run, tmp_path / "w")
    set_config(workdir, whatif={"base": "hybrid", "grid": {"k": [10, 60]}})
    snakemake(workdir, "--cores", "2", env=workflow_env)
    block = report(workdir)["whatif"]
    assert block["base"]["pairs"] == {"dev": 0, "test": 5} and block["chosen"] is None
    md = (workdir / "results/report.md").read_text()
    assert "no pairs on the dev split: nothing can be chosen" in md and "no change is suggested" not in md


PLUGIN = """\
import sys
import time

from plughelp import first  # a helper module beside the plugin file (item 6)


def rank(haystack, k):
    if SLEEP:
        time.sleep(SLEEP)
    if EXIT:
        sys.exit(0)
    return first(haystack, k)


SLEEP, EXIT = 0, False
"""


def test_a_plugin_that_exits_or_overruns_its_time_stops_the_run_naming_it(small_run, workflow_env, tmp_path):
    """Items 6: ``sys.exit(0)`` in a plugin ended its job without output and Snakemake blamed
    filesystem latency; a plugin had no time limit (search.plugin_timeout)."""
    workdir = clone(small_run, tmp_path / "w")
    (workdir / "mine").mkdir()
    (workdir / "mine" / "plughelp.py").write_text("def first(h, k):\n    return list(h.row_ids[:k])\n")
    plugin = workdir / "mine" / "plug.py"
    plugin.write_text(PLUGIN.replace("EXIT = 0, False", "EXIT = 0, True"))
    set_config(
        workdir, retrievers=["vipune", "dense", {"name": "mine", "use": "mine/plug.py:rank"}], search={"shards": 1}
    )
    proc = snakemake(workdir, "--cores", "2", env=workflow_env, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "plugin 'mine/plug.py:rank' called sys.exit(0) on question" in out
    assert "latency" not in out

    plugin.write_text(PLUGIN.replace("EXIT = 0, False", "EXIT = 3, False"))
    set_config(workdir, search={"plugin_timeout": 0.5})
    proc = snakemake(workdir, "--cores", "2", env=workflow_env, check=False)
    assert proc.returncode != 0
    assert "no answer within 0.5 s (search.plugin_timeout)" in proc.stdout + proc.stderr

    plugin.write_text(PLUGIN)
    snakemake(workdir, "--cores", "2", env=workflow_env)
    assert report(workdir)["retrievers"]["mine"]["pairs"] == 5


def test_a_plugin_calling_os_exit_fails_its_job_naming_it(small, workflow_env, tmp_path):
    """Issue 39 item 4: os._exit(0) in a plugin ended its search job with status 0: Snakemake
    reported it done, then a MissingOutputException with advice about filesystem latency."""
    workdir = make_workdir(tmp_path / "w", *small, retrievers=["dense", {"name": "quits", "use": "mine/quits.py:rank"}])
    (workdir / "mine").mkdir()
    (workdir / "mine" / "quits.py").write_text("import os\n\n\ndef rank(haystack, k):\n    os._exit(0)\n")
    proc = snakemake(workdir, "--cores", "2", env=workflow_env, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "MissingOutputException" not in out
    assert "plugin 'mine/quits.py:rank' called os._exit(0) on question" in out
