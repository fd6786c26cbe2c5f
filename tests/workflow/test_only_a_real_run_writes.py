"""Only a real run writes (issue 53): every Snakemake command that parses the workflow without
running it leaves results/ as it was and takes no lock, so it works while a run works; a dry run
with other values changes nothing a later report reads; a real run is refused while another
works, and a results folder it cannot write is one named error (issue 51). (A changed input still
shows its reruns in a dry run: tests/workflow/test_reruns.py.)"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.scenarios import clone, job_counts, make_workdir, planned, set_config, snakemake, snakemake_command
from support.tinymodel import build_tiny_model

pytestmark = pytest.mark.slow


def tree(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder``: a file's sha256 and modification time, a link's target."""
    out = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            out[key] = ("link", os.readlink(path))
        elif path.is_file():
            out[key] = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
        else:
            out[key] = ("dir",)
    return out


def hold_the_lock(workdir: Path) -> subprocess.Popen:
    """Another run's lock on ``workdir``'s results (plan.rundir, as a run's start takes it)."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"""
import os, time
from pathlib import Path
from vipune_eval.plan.rundir import hold_lock
os.chdir({str(workdir)!r})
lock = hold_lock()
print("held", flush=True)
time.sleep(600)
""",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_commands_that_only_read_leave_results_as_they_were_and_take_no_lock(small_run, workflow_env, tmp_path):
    """Each of them used to take results/.lock (so failed while a run worked), clear results/tmp
    and rewrite config.json, the manifest and the fingerprints."""
    workdir = clone(small_run, tmp_path / "run")
    holder = hold_the_lock(workdir)  # another run is working: a command that locks fails
    try:
        before = tree(workdir / "results")
        for args in (
            ("-n", "--cores", "1"),
            ("--lint",),
            ("--dag",),
            ("--rulegraph",),
            ("--summary",),
            ("--list-rules",),
            ("--list-target-rules",),
            ("--list-changes", "code"),
            ("--list-changes", "params"),
            ("--report", str(tmp_path / "report.html")),
            ("-n", "--cores", "1", "--config", "ks=[1,3]", "search_limit=20"),
        ):
            proc = snakemake(workdir, *args, env=workflow_env, check=False)
            assert proc.returncode == 0, (args, proc.stderr[-3000:])
            assert tree(workdir / "results") == before, args
        assert (tmp_path / "report.html").is_file()
    finally:
        holder.kill()
        holder.wait()


def test_report_html_after_a_dry_run_with_other_values_rebuilds_the_runs_own_report(small_run, workflow_env, tmp_path):
    """Seen before: `snakemake -n --config 'ks=[1,3]'` rewrote results/config.json, and
    report-html then captioned the run's plots of k = 1, 5, 10 "k = 1, 3". (The captions name no
    k now, issue 55: the run's own config is what report-html plans from.)"""
    workdir = clone(small_run, tmp_path / "run")
    snakemake(workdir, "-n", "--cores", "1", "--config", "ks=[1,3]", "search_limit=20", env=workflow_env)
    config = json.loads((workdir / "results" / "config.json").read_text())
    assert (config["ks"], config["search_limit"]) == ([1, 5, 10], 10)  # the run's own, not the dry run's
    proc = subprocess.run(
        [sys.executable, "-m", "vipune_eval", "report-html", "--directory", str(workdir)],
        capture_output=True,
        text=True,
        env=workflow_env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (workdir / "results" / "report.html").read_text()
    # the captions name no value (the plots read theirs from report.json); docutils writes @ as &#64;
    assert "each configured k (the x labels)" in html and "k = 1, 3" not in html
    assert "search limit (20)" not in html


def test_a_new_model_reruns_what_reads_it_without_snakemakes_records(small_run, workflow_env, tmp_path):
    """The fingerprints are written by a rule, run when their text changes: a new text is a missing
    mark (plan.planned_file.mark), so it is seen where Snakemake kept no record of the file (a
    results folder copied without .snakemake/), where its params trigger alone would see nothing."""
    workdir = clone(small_run, tmp_path / "run")
    shutil.rmtree(workdir / ".snakemake" / "metadata")
    assert planned(workdir, workflow_env) == {}
    set_config(workdir, model={"path": str(build_tiny_model(tmp_path / "other-model", seed=1))})
    assert {"planned_text", "planned_file", "embed", "search_arms", "report"} <= set(planned(workdir, workflow_env))


SNAKEMAKES_RACE = ("ProtectedOutputException", "Unable to obtain modification time of file")


def beside_a_run(workdir: Path, env: dict[str, str], *args: str, tries: int = 5) -> subprocess.CompletedProcess:
    """A Snakemake command while another run works. Snakemake (9.27) notes which outputs exist
    while it plans and then looks at them again, and a file the working run deleted in between
    fails the command before the workflow's own checks run: as a ProtectedOutputException naming a
    file nobody protected (os.access answers no), or as "Unable to obtain modification time of
    file … although it existed before" (both seen here under load). That race is Snakemake's,
    not the workflow's (docs/troubleshooting.md): the command is tried again, as a user would; a
    file really write-protected would fail every try."""
    for _ in range(tries):
        proc = snakemake(workdir, *args, env=env, check=False)
        said = proc.stdout + proc.stderr
        if not any(race in said for race in SNAKEMAKES_RACE):
            return proc
    pytest.fail(f"Snakemake's race {tries} times beside the run:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")


def test_a_dry_run_works_while_a_run_works_and_a_second_run_is_refused(small_run, workflow_env, tmp_path):
    """A run of its own in the background (filter_rows forced: most of the workflow again): while it
    works, a dry run plans, and a second real run is refused at once, naming the first's PID."""
    workdir = clone(small_run, tmp_path / "run")
    first = subprocess.Popen(
        snakemake_command(workdir, "--cores", "1", "--forcerun", "filter_rows"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=workflow_env,
        cwd=tmp_path,
    )
    try:
        lock = workdir / "results" / ".lock"
        deadline = time.monotonic() + 120
        while not (
            lock.is_file()
            and lock.read_text().strip() == str(first.pid)
            and any((workdir / ".snakemake" / "incomplete").iterdir())
        ):
            assert first.poll() is None and time.monotonic() < deadline, "the first run never started a job"
            time.sleep(0.2)
        dry = beside_a_run(workdir, workflow_env, "-n", "--cores", "1")  # it used to meet the lock
        assert dry.returncode == 0, dry.stderr[-3000:]
        jobs = job_counts(dry.stdout)
        second = beside_a_run(workdir, workflow_env, "--cores", "1")
        assert first.poll() is None, "the first run ended before the second was refused: use a longer run"
        assert jobs  # what the first run has yet to do
        assert second.returncode == 1
        assert f"results: another run (PID {first.pid}) is working in this directory" in second.stderr
        assert "vipune-eval: fix: wait for it to finish" in second.stderr and "Traceback" not in second.stderr
    finally:
        out, _ = first.communicate(timeout=600)
    assert first.returncode == 0, out[-3000:]
    assert planned(workdir, workflow_env) == {}


def test_a_results_folder_the_run_cannot_write_is_one_named_error(tmp_path, workflow_env, small):
    """Issue 51: a read-only results folder gave an OSError traceback from the lock, at parse
    time, with no `vipune-eval:` line and no fix. A dry run still works there (it writes nothing)."""
    workdir = make_workdir(tmp_path / "run", *small, scenario="small")
    results = workdir / "results"
    results.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(results)], capture_output=True, text=True
    )
    if mount.returncode:
        pytest.skip(
            f"cannot mount a read-only tmpfs here (it needs root; a chmod does not stop root): {mount.stderr.strip()}"
        )
    try:
        assert snakemake(workdir, "-n", "--cores", "1", env=workflow_env, check=False).returncode == 0
        proc = snakemake(workdir, "--cores", "1", env=workflow_env, check=False)
    finally:
        subprocess.run(["umount", "-l", str(results)], check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = proc.stderr.rstrip().splitlines()
    assert lines[-2] == f"vipune-eval: {results}: the run cannot write its results there (Read-only file system)"
    assert lines[-1].startswith("vipune-eval: fix: make the folder writable")
