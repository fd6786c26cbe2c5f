"""The run folder: the lock, what a killed run left behind, and what a real run's start writes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vipune_eval.core.fingerprints import Sha256Cache
from vipune_eval.core.io import atomic_path
from vipune_eval.errors import EvalError
from vipune_eval.plan import planned_file
from vipune_eval.plan.rundir import clear_tmp, hold_lock, start
from vipune_eval.stages.search import vipune_lib


def test_clear_tmp_removes_scratch_and_half_written_files_only(tmp_path):
    results = tmp_path / "results"
    (results / "tmp" / "search" / "persona-x").mkdir(parents=True)
    (results / "filter").mkdir()
    half = results / "filter" / ".pairs.parquet.abc123.tmp"
    half.write_text("half")
    done = results / "filter" / "pairs.parquet"
    with atomic_path(done) as tmp:
        tmp.write_text("done")
    clear_tmp(results)
    assert not (results / "tmp").exists() and not half.exists()
    assert done.read_text() == "done"


def test_clear_tmp_removes_the_lib_lanes_ram_folders_its_killed_jobs_left(tmp_path, monkeypatch):
    """Issue 44 item 4: /dev/shm folders of killed jobs stayed until those shards ran again."""
    ram, results = tmp_path / "shm", tmp_path / "results"
    ram.mkdir()
    monkeypatch.setattr(vipune_lib, "RAM", ram)
    left = vipune_lib.database_folder(results / "tmp" / "search" / "vipune-lib-x" / "shard-0-of-2")
    assert left.parent == ram
    clear_tmp(results)
    assert not left.exists()


def test_the_lock_is_refused_while_held_and_free_when_the_holder_dies(tmp_path):
    results = tmp_path / "results"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"""
import sys, time
sys.path.insert(0, {str(sys.path[0])!r})
from pathlib import Path
from vipune_eval.plan.rundir import hold_lock
lock = hold_lock(Path({str(results)!r}))
print("held", flush=True)
time.sleep(60)
""",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(EvalError, match=f"another run \\(PID {holder.pid}\\) is working in this directory"):
        hold_lock(results)
    holder.kill()
    holder.wait()
    hold_lock(results).close()  # a kill -9 leaves no lock behind


@pytest.fixture
def read_only(tmp_path):
    """``mount(folder)``: a read-only tmpfs at ``folder`` (root only; skipped elsewhere: root
    writes through permission bits, so a chmod would prove nothing)."""
    mounted = []

    def mount(folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        out = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)], capture_output=True, text=True
        )
        if out.returncode:
            pytest.skip(f"cannot mount a read-only tmpfs here (it needs root): {out.stderr.strip()}")
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_read_only_results_folder_is_one_named_error_with_its_fix(tmp_path, read_only):
    """Issue 51: an OSError traceback from the lock, no vipune-eval line, no fix."""
    results = read_only(tmp_path / "results")
    with pytest.raises(EvalError) as info:
        hold_lock(results)
    assert info.value.message == f"{results}: the run cannot write its results there (Read-only file system)"
    assert "mount it read-write" in info.value.fix and "--directory" in info.value.fix
    with pytest.raises(EvalError, match="cannot write its results there"):
        start({}, {}, [], read_only(tmp_path / "other" / "results"))


def test_start_takes_the_lock_and_writes_the_record_stages_the_plan_and_saves_the_caches(tmp_path, monkeypatch):
    """What only a real run does (the Snakefile's onstart): parsing writes nothing."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results" / "tmp" / "left-by-a-killed-run").mkdir(parents=True)
    data = tmp_path / "data.json"
    data.write_text("[]")
    cache = Sha256Cache(tmp_path / "results" / ".cache" / "sha256.json")
    cache.sha256(data)
    assert not cache.file.exists()
    planned = planned_file.texts({"results/report-inputs.json": {"views": []}})
    lock = start(planned, {"results/config.json": {"ks": [1, 5, 10]}}, [cache])
    try:
        assert json.loads(Path("results/config.json").read_text()) == {"ks": [1, 5, 10]}
        assert not Path("results/tmp/left-by-a-killed-run").exists()
        assert cache.file.exists() and not Path("results/report-inputs.json").exists()  # the job's to write
        planned_file.run_planned_file(
            planned_file.digest(planned["results/report-inputs.json"]), Path("results/report-inputs.json")
        )
        assert Path("results/report-inputs.json").read_text() == planned["results/report-inputs.json"]
        with pytest.raises(EvalError, match="another run"):
            hold_lock()
    finally:
        lock.close()
