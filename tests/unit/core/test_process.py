"""Child processes: a command as an error message shows it, and a kill that takes the children a
wrapper script started with it."""

import os
import subprocess
import time

from vipune_eval.core.process import kill_group, shown


def test_a_long_last_argument_is_shortened_in_a_message():
    assert shown(["vipune", "search", "--", "short question"]) == "vipune search -- short question"
    line = shown(["vipune", "search", "--", "x" * 500])
    assert line.endswith("x" * 200 + "… (500 characters)") and len(line) < 250


def test_kill_group_kills_the_children_of_a_wrapper(tmp_path):
    pid_file = tmp_path / "child.pid"
    proc = subprocess.Popen(["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"], start_new_session=True)
    for _ in range(100):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        time.sleep(0.05)
    child = int(pid_file.read_text())
    kill_group(proc)
    assert proc.wait(timeout=5) == -9
    for _ in range(100):  # the grandchild goes too (reaped by init, or a zombie at worst)
        try:
            os.kill(child, 0)
            state = open(f"/proc/{child}/stat").read().split(")")[-1].split()[0]
        except (ProcessLookupError, FileNotFoundError):
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the wrapper's child {child} still runs")
