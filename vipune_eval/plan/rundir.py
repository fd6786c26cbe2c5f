"""The run folder: what a real run does before its first job (its lock, what a killed run left
behind, the planned files' texts, its record), and the jobs' environment (their library caches
under results/, not the user's HOME).

Nothing here runs at parse time: a dry run, --lint, --dag, --summary, --list-* and --report parse
the Snakefile too, and must neither write nor lock. The Snakefile's ``onstart`` calls ``start``:
Snakemake runs it for a real run only, after the DAG is planned and before the first job."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from vipune_eval.core import paths
from vipune_eval.core.fingerprints import Sha256Cache
from vipune_eval.core.io import write_json_if_changed
from vipune_eval.errors import EvalError
from vipune_eval.plan import planned_file


def job_environment() -> dict[str, str]:
    """Caches the stages' libraries would put under HOME (onnxruntime's device id under
    $XDG_CACHE_HOME, matplotlib's font cache) go under results/.cache instead: a run writes
    nothing of its own under the user's HOME."""
    cache = Path(paths.CACHE).resolve()
    return {"XDG_CACHE_HOME": str(cache / "xdg"), "MPLCONFIGDIR": str(cache / "matplotlib")}


def start(
    planned: dict[str, str], record: dict[str, Any], caches: Iterable[Sha256Cache], results: Path = Path(paths.RESULTS)
) -> TextIO:
    """What a real run does before its first job: take the lock, clear what a killed run left,
    stage the planned files' texts (plan.planned_file), write the run's record (``record``: path →
    content, the config and the builds' sources) and save the caches parsing filled. Returns the
    lock, held until this process ends."""
    lock = hold_lock(results)
    try:
        clear_tmp(results)
        planned_file.stage(planned)
        for path, content in record.items():
            write_json_if_changed(path, content)
        for cache in caches:
            cache.save()
    except OSError as exc:
        lock.close()
        raise unwritable(results, exc) from None
    return lock


def unwritable(results: Path, exc: OSError) -> EvalError:
    return EvalError(
        f"{results.resolve()}: the run cannot write its results there ({exc.strerror or exc})",
        fix="make the folder writable (chmod -R u+w, or mount it read-write), or run in a folder "
        "you can write: snakemake --directory DIR (a dry run or --report writes nothing)",
    )


def hold_lock(results: Path = Path(paths.RESULTS)) -> TextIO:
    """An OS lock on ``results/.lock`` for as long as this process lives (a ``kill -9`` releases
    it with the process); refuses at once when another run holds it, naming that run's PID."""
    try:
        results.mkdir(parents=True, exist_ok=True)
        handle = open(results / ".lock", "a+", encoding="utf-8")
    except OSError as exc:
        raise unwritable(results, exc) from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        other = handle.read().strip() or "unknown"
        handle.close()
        raise EvalError(
            f"{results.resolve()}: another run (PID {other}) is working in this directory",
            fix="wait for it to finish, or stop it; two runs at once would delete each other's fresh outputs",
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def clear_tmp(results: Path = Path(paths.RESULTS)) -> None:
    """What a killed run left behind: its scratch folders, the lib lane's databases its jobs
    kept in RAM (/dev/shm) and the half-written files of io.atomic_path (only with the lock
    held: no job is running)."""
    from vipune_eval.stages.search.vipune_lib import clear_stale_databases

    clear_stale_databases(results / "tmp")
    shutil.rmtree(results / "tmp", ignore_errors=True)
    for stale in results.rglob(".*.tmp"):
        if stale.is_file():
            stale.unlink(missing_ok=True)
