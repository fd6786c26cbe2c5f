"""A failed run ends with what to do (issue 24): errors carry their fix, the summary of failed
jobs reads each job's log (a newcomer's offline first run through the workflow:
tests/workflow/test_offline_first_run.py)."""

import yaml

from support.scenarios import REPO
from vipune_eval import cli
from vipune_eval.errors import EvalError
from vipune_eval.plan import failures
from vipune_eval.vipune.binary import MISSING

CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
VIPUNE_FIX = "set vipune.binary"


def test_an_error_carries_its_fix_and_the_cli_prints_it_on_a_line_of_its_own(capsys, monkeypatch, tmp_path):
    exc = EvalError("the thing broke", fix="do this")
    assert (exc.message, exc.fix, str(exc)) == ("the thing broke", "do this", "the thing broke — do this")
    assert str(EvalError("no fix known")) == "no fix known"
    monkeypatch.setenv("PATH", str(tmp_path))  # no vipune anywhere
    assert cli.main(["vipune-binary", "--binary", "vipune"]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "vipune-eval: vipune-binary: vipune binary 'vipune' not found or not executable"
    assert lines[1].startswith("vipune-eval: fix: build vipune and its vipune-lane") and VIPUNE_FIX in lines[1]


def test_read_log_takes_the_first_harness_error_and_its_fix(tmp_path):
    log = tmp_path / "a.log"
    log.write_text(
        "2026-12-03 INFO downloading\n"
        "vipune-eval: download-model: cannot download the model\n"
        "vipune-eval: fix: set model.path\n"
        "vipune-eval: download-model: a second message\n"
    )
    found = failures.read_log("download_model", [str(log)])
    assert (found.rule, found.error, found.fix, found.where) == (
        "download_model",
        "cannot download the model",
        "set model.path",
        str(log),
    )


def test_the_fix_is_the_fix_line_alone(tmp_path):
    """One error-and-fix format (issue 36): the fix is EvalError.fix, printed on its own line; an
    error line is never split again to find one."""
    log = tmp_path / "a.log"
    log.write_text("vipune-eval: preflight: preflight of x: check failed — as a dash in the message\n")
    found = failures.read_log("preflight", [str(log)])
    assert found.error == "preflight of x: check failed — as a dash in the message"
    assert found.fix.startswith(f"read {log}")


def test_no_error_of_the_package_folds_its_fix_into_its_message():
    """A harness error says what to do with fix=, not after a dash in its message."""
    import ast

    folded = []
    for path in (REPO / "vipune_eval").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            name = getattr(node, "func", None)
            name = getattr(name, "id", None) or getattr(name, "attr", "")
            if isinstance(node, ast.Call) and name.endswith(("Error", "Failed")) and node.args:
                texts = [
                    n.value for n in ast.walk(node.args[0]) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                ]
                if any(" — " in t for t in texts):
                    folded.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not folded, folded


def test_read_log_of_a_traceback_gives_the_exception_and_points_to_the_log(tmp_path):
    log = tmp_path / "a.log"
    log.write_text('Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad value\n\n')
    found = failures.read_log("filter", [str(log)])
    assert found.error == "ValueError: bad value" and str(log) in found.fix
    empty = failures.read_log("score", [str(tmp_path / "missing.log")])
    assert "empty" in empty.error and "missing.log" in empty.fix


def test_a_long_error_line_is_cut_in_its_middle_keeping_vipunes_reason(tmp_path):
    """CI (stop 47's run): a question of 3665 characters in the command line cut off the binary's
    "exited 3: content exceeds 512-token embedding limit" when a line kept only its start."""
    log = tmp_path / "a.log"
    reason = "exited 3: content exceeds 512-token embedding limit (measured: 616 tokens)"
    log.write_text(f"vipune-eval: search-vipune: persona q1: `vipune search -- {'again ' * 600}` {reason}\n")
    found = failures.read_log("search_vipune", [str(log)])
    assert len(found.error) == failures.WIDTH and "…" in found.error
    assert found.error.startswith("persona q1: `vipune search -- again") and found.error.endswith(reason)


def test_jobs_that_did_not_start_but_must_fail_are_listed_with_their_fix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no results/fingerprints here
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    found = failures.not_started(CONFIG, MISSING, {"download_dataset"})
    assert [f.rule for f in found] == ["download_model", "vipune_binary"]
    assert "model.path" in found[0].fix and VIPUNE_FIX in found[1].fix
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # online: a download may well work
    assert [f.rule for f in failures.not_started(CONFIG, MISSING, set())] == ["vipune_binary"]
    assert failures.not_started(CONFIG, "0.20.0-abc", set()) == []  # vipune was found


def test_the_summary_ends_with_one_error_and_one_fix_per_job(tmp_path):
    logs = []
    for name, fix in (("b", "fix b"), ("a", "fix a")):
        log = tmp_path / f"{name}.log"
        log.write_text(f"vipune-eval: {name}: broke\nvipune-eval: fix: {fix}\n")
        logs.append((f"rule_{name}", [str(log)]))
    local = {**CONFIG, "dataset": {"path": "data.json"}, "model": {"path": "model"}}
    lines = failures.closing_lines(logs, local, None)
    assert lines[0].startswith("vipune-eval: 2 job(s) failed")
    assert lines[1:] == [
        f"  rule_a (log: {tmp_path / 'a.log'}): a: broke",
        "    fix: fix a",
        f"  rule_b (log: {tmp_path / 'b.log'}): b: broke",
        "    fix: fix b",
    ]
    assert failures.closing_lines([], local, None) == []


# ---------------------------------------------------------------- a stopped run (issue 51 item 6)


def test_a_log_that_ends_on_a_progress_line_names_a_killed_job_not_that_line(tmp_path):
    """A job killed mid-way (SIGTERM, out of memory) left a log whose last line is an INFO line:
    the summary quoted it as the job's error."""
    log = tmp_path / "a.log"
    log.write_text(
        "2026-12-07 12:19:07,894 INFO embed shard 0/2: 14 texts\n"
        "2026-12-07 12:19:09,436 INFO embed shard 0/2: texts: 7 / 14 (1281.7/s, ETA 0.0 min)\n"
    )
    found = failures.read_log("embed", [str(log)])
    assert found.error == (
        "its log ends without an error, on '2026-12-07 12:19:09,436 INFO embed shard 0/2: texts: "
        "7 / 14 (1281.7/s, ETA 0.0 min)': the job was killed mid-way (a signal, out of memory, "
        "a cluster's time limit)"
    )


def test_a_stopped_run_says_so_names_the_jobs_it_cut_off_and_how_to_go_on():
    jobs = [("search_vipune", ["a.log"]), ("score", ["b.log"]), ("search_vipune", ["c.log"])]
    assert failures.stopped_lines(["SIGTERM", "SIGTERM"], jobs, "results/report.json") == [
        "vipune-eval: the run was stopped (SIGTERM) before it finished; 3 job(s) were cut off (score, search_vipune "
        "×2), their unfinished outputs removed; results/report.json is the previous run's report, not this one's",
        "vipune-eval: fix: run the same command again to go on: every finished job is kept",
    ]
    assert (
        failures.stopped_lines(["SIGINT"], [], None)[0]
        == "vipune-eval: the run was stopped (SIGINT) before it finished"
    )


def test_a_stop_is_noted_and_handed_to_the_handler_snakemake_set(monkeypatch):
    import os
    import signal

    seen = []
    monkeypatch.setattr(failures, "STOPPED", [])
    previous = signal.signal(signal.SIGUSR1, lambda number, frame: seen.append(number))
    try:
        failures.watch_stops((signal.SIGUSR1,))
        os.kill(os.getpid(), signal.SIGUSR1)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert failures.STOPPED == ["SIGUSR1"] and seen == [signal.SIGUSR1]
