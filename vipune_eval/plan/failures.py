"""What a failed run prints last: each failed job, the first error line of its log, and its fix.

Snakemake ends a failed run with its own trailer ("At least one job did not complete
successfully"); the workflow's ``onerror`` collects the failed jobs (common.smk's ``failed_jobs``),
hands them to :func:`closing_lines` and prints the result after that trailer, so the last lines a
user reads say what to do. Jobs that never started because an earlier one failed, but whose
failure is certain (no vipune on PATH, a download with ``HF_HUB_OFFLINE`` set), are listed too, so
one run names every fix. A run stopped by a signal (SIGTERM, Ctrl-C: ``watch_stops``) is summarised
as a stop, not as failed jobs. Runs in the Snakemake process only (the onstart and onerror hooks);
no rule runs it.
"""

from __future__ import annotations

import os
import re
import signal
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vipune_eval.cli import COMMANDS
from vipune_eval.core import paths
from vipune_eval.errors import FIX, PREFIX, EvalError
from vipune_eval.vipune.binary import MISSING, resolve_binary

WIDTH = 240  # an error line longer than this is cut in its middle (the log keeps it whole)
TAIL = 120  # what a cut line keeps of its end: vipune's own reason comes after the command it ran


@dataclass(frozen=True)
class Failure:
    rule: str
    error: str
    fix: str
    where: str  # the log file, or why the job did not start


# A line the CLI's logging writes as a job goes ("2026-12-07 12:19:09,436 INFO embed shard 0/2: …"):
# a log that ends on one holds no error, its job was killed mid-way.
_PROGRESS = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (?:DEBUG|INFO|WARNING) ")
STOPPED: list[str] = []  # the signals that stopped this run, as watch_stops noted them


def watch_stops(signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
    """Note each of ``signals`` the Snakemake process receives in ``STOPPED``, then let the handler
    it had act on it (Snakemake's: finish or cancel the jobs). Called from ``onstart``, after
    Snakemake set its own handlers."""
    for number in signals:
        previous = signal.getsignal(number)

        def noted(received: int, frame: object, previous: object = previous) -> None:
            STOPPED.append(signal.Signals(received).name)
            if callable(previous):
                previous(received, frame)
            elif previous == signal.SIG_DFL:
                signal.signal(received, signal.SIG_DFL)
                os.kill(os.getpid(), received)

        signal.signal(number, noted)


def stopped_lines(stopped: list[str], jobs: list[tuple[str, list[str]]], report: str | None) -> list[str]:
    """What a run stopped by a signal prints last: that it was stopped, the jobs the stop cut off,
    and that running it again goes on (``report``: the previous run's report, where one is there)."""
    cut = Counter(rule for rule, _ in jobs)
    jobs_cut = (
        f"; {len(jobs)} job(s) were cut off ({', '.join(f'{r} ×{n}' if n > 1 else r for r, n in sorted(cut.items()))}), "
        "their unfinished outputs removed"
        if jobs
        else ""
    )
    previous = f"; {report} is the previous run's report, not this one's" if report else ""
    return [
        f"vipune-eval: the run was stopped ({', '.join(dict.fromkeys(stopped))}) before it finished{jobs_cut}"
        f"{previous}",
        f"{FIX}run the same command again to go on: every finished job is kept",
    ]


def _short(text: str) -> str:
    return text if len(text) <= WIDTH else text[: WIDTH - TAIL - 1] + "…" + text[-TAIL:]


def read_log(rule: str, logs: list[str]) -> Failure:
    """The first ``vipune-eval:`` error line of a job's logs and its fix.

    The fix is the ``vipune-eval: fix:`` line the CLI prints (errors.EvalError.shown). A log
    without a harness message (a Python traceback) gives its last line: the exception.
    """
    lines: list[str] = []
    for log in logs:
        try:
            lines += [line.strip() for line in Path(log).read_text(errors="replace").splitlines()]
        except OSError:
            continue
    lines = [line for line in lines if line]
    where = ", ".join(logs) or "no log"
    fixes = [line.removeprefix(FIX) for line in lines if line.startswith(FIX)]
    errors = [line.removeprefix(PREFIX) for line in lines if line.startswith(PREFIX) and not line.startswith(FIX)]
    if errors:
        error = errors[0]
        command, _, rest = error.partition(": ")
        if command in COMMANDS and rest:  # the rule names it already
            error = rest
    elif lines and _PROGRESS.match(lines[-1]):
        error = (
            f"its log ends without an error, on {_short(lines[-1])!r}: the job was killed mid-way "
            "(a signal, out of memory, a cluster's time limit)"
        )
    elif lines:
        error = lines[-1]
    else:
        error = "its log is empty; Snakemake's message about this job is above"
    fix = fixes[0] if fixes else f"read {where} (docs/troubleshooting.md lists every message and its fix)"
    return Failure(rule, _short(error), fix, where)


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def not_started(config: dict[str, Any], primary: str | None, seen: set[str]) -> list[Failure]:
    """Source jobs that did not run (an earlier job failed) but are certain to fail."""
    out: list[Failure] = []
    for rule, key, fingerprint in (
        ("download_dataset", "dataset", paths.DATASET_FINGERPRINT),
        ("download_model", "model", paths.MODEL_FINGERPRINT),
    ):
        if rule not in seen and not config[key]["path"] and _offline() and not Path(fingerprint).exists():
            out.append(
                Failure(
                    rule,
                    f"the {key} is not downloaded and HF_HUB_OFFLINE is set",
                    f"put a local copy in place and set {key}.path in the config to it "
                    "(or unset HF_HUB_OFFLINE to download it)",
                    "not started",
                )
            )
    if primary == MISSING and "vipune_binary" not in seen:
        try:
            resolve_binary(config["vipune"]["binary"])
        except EvalError as exc:
            out.append(Failure("vipune_binary", exc.message, exc.fix or "", "not started"))
    return out


def summary(failures: list[Failure]) -> list[str]:
    """The lines printed last: one header, then per job its error line and its fix."""
    if not failures:
        return []
    lines = [f"vipune-eval: {len(failures)} job(s) failed or cannot run; what to do:"]
    for f in failures:
        where = "not started: an earlier job failed" if f.where == "not started" else f"log: {f.where}"
        lines += [f"  {f.rule} ({where}): {f.error}", f"    fix: {f.fix}"]
    return lines


def closing_lines(jobs: list[tuple[str, list[str]]], config: dict[str, Any], primary: str | None) -> list[str]:
    """The summary of a failed run: ``jobs`` are the failed jobs' (rule, logs)."""
    failures = [read_log(rule, logs) for rule, logs in jobs]
    failures += not_started(config, primary, {f.rule for f in failures})
    return summary(sorted(failures, key=lambda f: (f.rule, f.where)))
