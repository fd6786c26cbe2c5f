"""Child processes: a command as an error message shows it, a kill that takes the children a
wrapper script started with it, and a watchdog that kills a child when its job dies."""

import os
import signal
import subprocess
import sys
import time

from vipune_eval.core.process import kill_group, shown


def test_a_long_last_argument_is_shortened_in_a_message():
    assert shown(["vipune", "search", "--", "short question"]) == "vipune search -- short question"
    line = shown(["vipune", "search", "--", "x" * 500])
    assert line.endswith("x" * 200 + "… (500 characters)") and len(line) < 250


def test_kill_group_kills_the_children_of_a_wrapper(tmp_path):
    pid_file = tmp_path / "child.pid"
    proc = subprocess.Popen(["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"], start_new_session=True)
    _within(5, lambda: pid_file.exists() and pid_file.read_text().strip())
    child = int(pid_file.read_text())
    kill_group(proc)
    assert proc.wait(timeout=5) == -9
    # the grandchild goes too (reaped by init, or a zombie at worst)
    assert _within(5, lambda: not _runs(child)), f"the wrapper's child {child} still runs"


WATCHED_JOB = """
import subprocess, sys, time
from pathlib import Path
from vipune_eval.core.process import Watchdog
child = subprocess.Popen(["sleep", "60"], start_new_session=True)
watchdog = Watchdog(child, [Path(sys.argv[1])])
print(child.pid, flush=True)
if sys.argv[2] == "release":
    watchdog.release()
    child.kill()
    child.wait()
    print("released", flush=True)
time.sleep(60)
"""


def test_a_watchdog_kills_the_child_and_removes_its_folder_when_the_job_dies_and_not_once_released(tmp_path):
    """The vipune-lane's watchdog (issue 44 item 4): a job killed with SIGKILL leaves nothing running
    or in its folder; a job that ended the child itself released it, and nothing is touched."""
    for end in ("kill", "release"):
        folder = tmp_path / end
        folder.mkdir()
        job = subprocess.Popen(
            [sys.executable, "-c", WATCHED_JOB, str(folder), end],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        child = int(job.stdout.readline())
        if end == "release":
            assert job.stdout.readline().strip() == "released"
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        if end == "kill":
            _within(10, lambda folder=folder, child=child: not (folder.exists() or _runs(child)))
        assert folder.exists() == (end == "release") and not _runs(child)


def _runs(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


GUARDED_JOB = """
import sys, time
from pathlib import Path
from vipune_eval.core.process import Watchdog
watchdog = Watchdog(None, [Path(sys.argv[1])])
Path(sys.argv[1]).mkdir()
(Path(sys.argv[1]) / "db.sqlite").write_text("x")
print("made", flush=True)
time.sleep(60)
"""


def test_a_watchdog_without_a_child_removes_the_folder_a_killed_job_made(tmp_path):
    """The lib lane's job guards its /dev/shm folder before its vipune-lane starts: CI killed a job in
    that window, and its folder stayed in RAM until the next run."""
    folder = tmp_path / "ram"
    job = subprocess.Popen(
        [sys.executable, "-c", GUARDED_JOB, str(folder)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert job.stdout.readline().strip() == "made" and folder.exists()
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    assert _within(10, lambda: not folder.exists())


def _within(seconds: float, condition) -> bool:
    """Whether ``condition()`` holds within ``seconds`` (polled every 50 ms)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
