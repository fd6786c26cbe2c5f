"""The holes a break-it session found (issue 10), each through the Snakemake CLI: no run ends
with a complete-looking wrong report, and every failure says what happened."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.fakes import fake_build
from support.scenarios import SNAKEFILE, VIPUNE_SEARCHES, clone, make_workdir, set_config, snakemake

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def small(scenario_inputs):
    return scenario_inputs("small")


@pytest.fixture(scope="module")
def small_run(finished_run):
    """A finished run on ``small``: tests that vary only the vipune lane start from a clone."""
    return finished_run("small")[0]


def report(workdir):
    return json.loads((workdir / "results/report.json").read_text())


@pytest.mark.parametrize("fault, words", [("repeat-id", "twice"), ("over-limit", "more than --limit 10")])
def test_a_contract_violation_is_a_recorded_failure_not_a_score(small, small_run, workflow_env, tmp_path, fault,
                                                                words):
    victim = next(i for i in json.loads(Path(small[0]).read_text()) if not i["question_id"].endswith("_abs"))
    workdir = clone(small_run, tmp_path / "w", drop=VIPUNE_SEARCHES)
    set_config(workdir, vipune={"on_error": "record"})
    snakemake(workdir, "--cores", "2", env={**workflow_env, "FAKE_VIPUNE_FAULT": fault,
                                            "FAKE_VIPUNE_FAULT_MATCH": victim["question"]})
    vipune = report(workdir)["retrievers"]["vipune"]
    assert list(vipune["failed"]) == [victim["question_id"]] and vipune["pairs"] == 4
    message = vipune["failed"][victim["question_id"]]
    assert words in message and "a contract violation" in message and "--no-touch --" in message


def test_question_ids_holding_separators_score_like_any_other(small, workflow_env, tmp_path):
    data, model = small
    rows = json.loads(Path(data).read_text())
    usable = [r for r in rows if not r["question_id"].endswith("_abs")]
    for row, qid in zip(usable, ["a::b", "x/y", "-lead", "q::1::2"]):
        row["question_id"] = qid
    renamed = tmp_path / "renamed.json"
    renamed.write_text(json.dumps(rows))
    workdir = make_workdir(tmp_path / "w", renamed, model)
    snakemake(workdir, "--cores", "2", env=workflow_env)
    result = report(workdir)
    for name in ("vipune", "dense", "hybrid"):
        metrics = json.loads((workdir / result["retrievers"][name]["run"].replace("runs", "metrics")
                              .replace(".run", ".json")).read_text())
        for qid in ["a::b", "x/y", "-lead", "q::1::2"]:
            assert metrics["per_query"][qid]["recall@10"] == 1.0, (name, qid)  # was 0: ids were split


def test_more_search_shards_than_pairs_gives_empty_shards(small_run, workflow_env, tmp_path):
    workdir = clone(small_run, tmp_path / "w")
    set_config(workdir, search={"shards": 8, "threads": 1})
    snakemake(workdir, "--cores", "2", env=workflow_env)
    assert report(workdir)["pairs"] == 5
    empty = workdir / "results/search/dense/shard-7-of-8.run"
    assert empty.exists() and empty.read_text() == ""


@pytest.mark.parametrize("fault, message", [
    ("version-garbage", r"did not print vipune's version JSON \(exit code 0 after"),
    ("version-fail", r"exit code 1 after .*cannot initialise"),
])
def test_a_broken_version_call_stops_the_run_saying_what_it_printed(small, workflow_env, tmp_path, fault,
                                                                    message):
    import re

    workdir = make_workdir(tmp_path / "w", *small)
    proc = snakemake(workdir, "-n", env={**workflow_env, "FAKE_VIPUNE_FAULT": fault}, check=False)
    assert proc.returncode != 0
    assert re.search(message, proc.stderr) and "MissingOutputException" not in proc.stderr + proc.stdout


def test_a_changed_file_behind_a_wrapper_and_a_forced_rerun_really_search_again(small_run, workflow_env,
                                                                                 tmp_path):
    build = tmp_path / "build.txt"
    build.write_text("build 1")
    workdir = clone(small_run, tmp_path / "w")
    set_config(workdir, vipune={"fingerprint_files": [str(build)]})
    snakemake(workdir, "--cores", "2", env=workflow_env)
    first = report(workdir)["provenance"]["vipune"]["id"]
    # Forced: the per-persona cache of a completed shard is not reused (a failing binary fails).
    proc = snakemake(workdir, "--cores", "2", "--forcerun", "search_vipune",
                     env={**workflow_env, "FAKE_VIPUNE_FAULT": "error"}, check=False)
    assert proc.returncode != 0 and "injected" in proc.stdout + proc.stderr
    snakemake(workdir, "--cores", "2", env=workflow_env)
    build.write_text("build 2")  # the wrapper (the fake) is unchanged; the build behind it is not
    out = snakemake(workdir, "-n", "--cores", "1", env=workflow_env).stdout
    assert "search_vipune" in out and "preflight" in out
    snakemake(workdir, "--cores", "2", env=workflow_env)
    assert report(workdir)["provenance"]["vipune"]["id"] != first


def start(workdir, env):
    cmd = [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "--directory", str(workdir),
           "--configfile", str(workdir / "config.yaml"), "--cores", "2"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def wait_for(condition, proc, seconds=120):
    deadline = time.monotonic() + seconds
    while not condition():
        assert proc.poll() is None, "the run ended too early"
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def test_a_second_run_is_refused_at_once_and_a_kill_9_leaves_no_lock_or_scratch(small_run, workflow_env,
                                                                               tmp_path):
    workdir = clone(small_run, tmp_path / "w", drop=VIPUNE_SEARCHES)
    first = start(workdir, {**workflow_env, "FAKE_VIPUNE_DELAY": "0.5"})
    wait_for(lambda: list((workdir / "results/tmp").glob("*search/*/*/persona-*")), first)
    began = time.monotonic()
    second = snakemake(workdir, "--cores", "2", env=workflow_env, check=False)
    assert second.returncode != 0 and time.monotonic() - began < 30
    assert f"another run (PID {first.pid}) is working in this directory" in second.stderr
    assert first.poll() is None  # the first run goes on, its outputs untouched
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert list((workdir / "results/tmp").iterdir())  # what the killed run left
    snakemake(workdir, "--cores", "2", env=workflow_env)  # no --unlock, no clean-up by hand
    assert not [p for p in (workdir / "results/tmp").rglob("*") if p.is_file() or p.name.startswith("persona-")]
    assert report(workdir)["pairs"] == 5


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
    set_config(workdir, retrievers=["vipune", "dense", {"name": "mine", "use": "mine/plug.py:rank"}],
               search={"shards": 1})
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


def test_spaces_in_the_workdir_dataset_model_and_binary_paths(small, workflow_env, tmp_path):
    """Item 4: the dataset and model paths reached the shell commands of filter, embed, preflight
    and vipune-home unquoted (``error: unrecognized arguments: ace/lme.json``). Every path, in
    every rule, is quoted: a run from a folder with spaces in its name, on a dataset, a model and
    a vipune binary in folders with spaces (chunk rows too: the tokenizer's path)."""
    import shutil

    data, model = small
    spaced = tmp_path / "a folder with spaces"
    (spaced / "sp ace").mkdir(parents=True)
    shutil.copy(data, spaced / "sp ace" / "lme.json")
    shutil.copytree(model, spaced / "my model")
    binary, _ = fake_build(spaced / "my build")  # the lane beside it, in a folder with spaces too
    workdir = make_workdir(spaced / "the run", spaced / "sp ace" / "lme.json", spaced / "my model",
                           scenario="small", granularities=["session", "chunk"],
                           vipune={"binary": str(binary)})
    snakemake(workdir, "--cores", "2", env=workflow_env)
    result = report(workdir)
    assert result["pairs"] == 5 and result["retrievers"]["vipune"]["pairs"] == 5
    assert result["retrievers"]["vipune-lib"]["pairs"] == 5
    assert set(result["views"]) == {"session", "chunk"} and result["views"]["chunk"]["pairs"] == 5


def test_a_plugin_calling_os_exit_fails_its_job_naming_it(small, workflow_env, tmp_path):
    """Issue 39 item 4: os._exit(0) in a plugin ended its search job with status 0: Snakemake
    reported it done, then a MissingOutputException with advice about filesystem latency."""
    workdir = make_workdir(tmp_path / "w", *small,
                           retrievers=["dense", {"name": "quits", "use": "mine/quits.py:rank"}])
    (workdir / "mine").mkdir()
    (workdir / "mine" / "quits.py").write_text("import os\n\n\ndef rank(haystack, k):\n    os._exit(0)\n")
    proc = snakemake(workdir, "--cores", "2", env=workflow_env, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "MissingOutputException" not in out
    assert "plugin 'mine/quits.py:rank' called os._exit(0) on question" in out
