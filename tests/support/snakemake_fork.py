"""Snakemake's CLI, run in a child forked from a process that imported Snakemake once.

A `python -m snakemake` start spends about 0.7 CPU-s importing Snakemake before it reads the
Snakefile (a dry run of the .test scenario: 1.15 CPU-s as a fresh process, 0.43 forked), and
the suite starts Snakemake a few hundred times on 2 cores. So each pytest worker keeps one
server (this file run as a script) that imports Snakemake (and jsonschema, yaml) and nothing of
this project, which the tests edit, and forks a child per command. The child is what `python -m snakemake ARGS` would be: the same argv,
environment, working directory and stdio (stdin from /dev/null, stdout and stderr to files), it
imports the workflow's own code itself, and it exits through the interpreter as usual (atexit,
flushes). What it inherits is only the imported modules and the server's hash seed.

`scenarios.snakemake` uses it; a test that needs the process itself (to kill it, or a run in the
background) starts `scenarios.snakemake_command` with subprocess, and one that compares two runs
for determinism starts one of them ``fresh`` (a hash seed of its own).
tests/workflow/test_snakemake_fork.py holds that a forked command prints and exits as a fresh one.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

_server: subprocess.Popen | None = None
_lock = threading.Lock()  # one request at a time per server
_server_pid: int | None = None  # the pytest process that started it (a fork of that one has none)
_server_python: dict[str, str] | None = None  # its interpreter's settings (_python_settings)
_ENTRY = ""  # snakemake/__main__.py, sys.argv[0] of `python -m snakemake`


def _python_settings(env: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """What of an environment the interpreter reads when it starts (PYTHONPATH, PYTHONUNBUFFERED…)."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


def _start() -> subprocess.Popen:
    global _server, _server_pid, _server_python
    if _server is None or _server.poll() is not None or _server_pid != os.getpid():
        _server_python = _python_settings(os.environ)
        _server = subprocess.Popen(
            [sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        _server_pid = os.getpid()
        if _server.stdout.readline().strip() != "ready":  # type: ignore[union-attr]
            raise RuntimeError(f"{__file__}: the Snakemake server did not start")
    return _server


def run(
    cmd: list[str], *, env: dict[str, str], cwd: Path, timeout: float | None = None, fresh: bool = False
) -> subprocess.CompletedProcess:
    """``cmd`` (``python -m snakemake ARGS``) in a forked child; stdout and stderr captured as text,
    as ``subprocess.run(..., capture_output=True, text=True)`` returns them. A process of its own
    where the test asks for one (``fresh``) or where ``env`` sets the interpreter's start otherwise
    than the server's (a PYTHONPATH naming the SLURM executor plugin: a child's sys.path is the
    server's)."""
    if cmd[:3] != [sys.executable, "-m", "snakemake"]:
        raise ValueError(f"not a `python -m snakemake` command: {cmd[:3]}")
    with _lock:
        server = None if fresh else _start()
        if server is None or _python_settings(env) != _server_python:
            return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
        return _forked(server, cmd, env, cwd, timeout)


def _forked(
    server: subprocess.Popen, cmd: list[str], env: dict[str, str], cwd: Path, timeout: float | None
) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="snakemake-fork-") as folder:
        out, err = Path(folder, "stdout"), Path(folder, "stderr")
        request = {
            "args": cmd[3:],
            "env": env,
            "cwd": str(cwd),
            "stdout": str(out),
            "stderr": str(err),
            "timeout": timeout,
        }
        server.stdin.write(json.dumps(request) + "\n")  # type: ignore[union-attr]
        server.stdin.flush()  # type: ignore[union-attr]
        reply = json.loads(server.stdout.readline() or "null")  # type: ignore[union-attr]
        if reply is None:
            raise RuntimeError(f"{__file__}: the Snakemake server ended ({server.wait()})")
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
    if reply["timed_out"]:
        raise subprocess.TimeoutExpired(cmd, timeout or 0, stdout, stderr)
    return subprocess.CompletedProcess(cmd, reply["returncode"], stdout, stderr)


def _child(request: dict) -> None:
    """Become ``python -m snakemake ARGS`` (never returns: SystemExit ends the interpreter)."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    sys.argv = [_ENTRY, *request["args"]]
    sys.path[0] = os.getcwd()  # as -m puts it (this script's folder, tests/support, is not on it)
    import snakemake.workflow

    # Snakemake 9.27 takes the folder it reports as "Run directory" when it is imported (a class
    # attribute, workflow.py: `_rundir = str(Path.cwd().absolute())`): the server's, not the command's.
    snakemake.workflow.Workflow._rundir = os.getcwd()
    import snakemake.__main__  # noqa: F401  (importing it runs the CLI, as -m does; main() exits)


def _wait(pid: int, timeout: float | None) -> tuple[int, bool]:
    """The child's exit status as subprocess reports it, and whether it was killed for taking
    longer than ``timeout`` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, 0 if deadline is None else os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), False
        if time.monotonic() > deadline:  # type: ignore[operator]
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -signal.SIGKILL, True
        time.sleep(0.01)


def serve() -> None:
    global _ENTRY
    import jsonschema  # noqa: F401  (jsonschema and yaml: what the workflow checks its config with)
    import snakemake.api  # noqa: F401  (what every start imports before it reads a Snakefile)
    import snakemake.cli  # noqa: F401
    import snakemake.dag  # noqa: F401
    import snakemake.executors.dryrun  # noqa: F401
    import snakemake.executors.local  # noqa: F401
    import snakemake.executors.touch  # noqa: F401
    import snakemake.persistence  # noqa: F401
    import snakemake.report  # noqa: F401
    import snakemake.workflow  # noqa: F401
    import yaml  # noqa: F401

    _ENTRY = importlib.util.find_spec("snakemake.__main__").origin  # type: ignore[union-attr]
    assert threading.active_count() == 1, "a thread at fork time would be copied half-way"
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        returncode, timed_out = _wait(pid, request["timeout"])
        print(json.dumps({"returncode": returncode, "timed_out": timed_out}), flush=True)


if __name__ == "__main__":
    serve()
