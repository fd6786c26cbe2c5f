"""The run folder: the lock, and what a killed run left behind."""

import subprocess
import sys
from pathlib import Path

import pytest

from vipune_eval.errors import EvalError
from vipune_eval.core.io import atomic_path
from vipune_eval.plan.rundir import clear_tmp, hold_lock
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
    holder = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
sys.path.insert(0, {str(sys.path[0])!r})
from pathlib import Path
from vipune_eval.plan.rundir import hold_lock
lock = hold_lock(Path({str(results)!r}))
print("held", flush=True)
time.sleep(60)
"""], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(EvalError, match=f"another run \\(PID {holder.pid}\\) is working in this directory"):
        hold_lock(results)
    holder.kill()
    holder.wait()
    hold_lock(results).close()  # a kill -9 leaves no lock behind
