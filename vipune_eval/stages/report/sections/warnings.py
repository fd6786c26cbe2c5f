"""The warnings, what changes the reading of the numbers (first in report.md, the summary and the
HTML report's first page): failed pairs in every view (named, with vipune's own words), builds
that fail their preflight, truncated gold sessions, a lane that no longer agrees with its mirror or
the binary, or scored other pairs than it (stages.report.sections.agreement), arms that do not
explain the list they were recorded for (stages.report.sections.explanations), and tables too small
for an interval."""

from __future__ import annotations

from vipune_eval.core.failed_pair import FailedPair
from vipune_eval.stages.report.document import NO_INTERVAL_NOTE, Table, one_line
from vipune_eval.stages.report.report_json import Report
from vipune_eval.stages.report.sections import agreement, explanations
from vipune_eval.stages.report.sections.misses import truncation_warning
from vipune_eval.stages.report.sections.orders import and_listed, by_retriever, first_named, in_view, view_order
from vipune_eval.stages.report.sections.provenance import stale_copies
from vipune_eval.stages.report.sections.vipune_builds import failed_preflight

PAIRS_NAMED = 10  # a warning names at most this many failed pairs
REASON_CHARS = 200  # and vipune's message in at most this many characters


def failure_reason(failure: FailedPair) -> str:
    """Why a pair failed, in vipune's own words: its message and the code it exited with, or the
    timeout it was killed at, with the fix, as the search recorded them (core.failed_pair), never
    read back from the harness's text."""
    if failure.get("timeout") is not None:  # a status file of an earlier version has no such field
        return (
            f"vipune gave no answer within {failure['timeout']:g} s (vipune.timeout) and was killed: "
            "raise vipune.timeout, or see whether vipune hangs on these questions"
        )
    error = one_line(failure["error"] or "", REASON_CHARS)
    code = failure["exit_code"]
    if error:
        return f'vipune exited {code} saying "{error}"' if code is not None else f'vipune said "{error}"'
    return f"vipune exited {code}" if code is not None else "no exit code and no message from vipune"


def _who(report: Report, failed_in: tuple[tuple[str, str], ...]) -> str:
    """The retrievers (and, where the report has several views, the views) that failed a group of
    pairs: ``vipune and vipune-semantic``, ``vipune-lib in the turn view``."""
    views: dict[str, list[str]] = {}  # view → its retrievers that failed them
    for view, name in failed_in:
        views.setdefault(view, []).append(name)
    if len({tuple(names) for names in views.values()}) == 1:
        return and_listed(next(iter(views.values()))) + in_view(report, *views)
    return "; ".join(and_listed(names) + in_view(report, view) for view, names in views.items())


def failed_pairs(report: Report) -> list[str]:
    """The pairs a search failed (vipune.on_error: record) in any view, named, with why: one line
    per reason and set of retrievers and views (vipune's two runs of a lane fail the same personas,
    often in every view)."""
    failed: dict[tuple[str, str], list[tuple[str, str]]] = {}  # (pair, why) → the (view, retriever)s that failed it
    for view in view_order(report):
        retrievers = report["views"][view]["retrievers"]
        for name in by_retriever(report, retrievers):
            failures = retrievers[name].get("failed") or {}
            for qid in sorted(failures):
                failed.setdefault((qid, failure_reason(failures[qid])), []).append((view, name))
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], list[str]] = {}  # (why, where) → pairs
    for (qid, reason), where in failed.items():
        groups.setdefault((reason, tuple(where)), []).append(qid)
    out = []
    for (reason, places), qids in groups.items():
        many = len(qids) != 1
        out.append(
            f"{_who(report, places)}: {len(qids)} pair{'s' if many else ''} failed and "
            f"{'are' if many else 'is'} left out of every average (vipune.on_error: record; report.json "
            f"lists why); {reason}: {first_named(qids, PAIRS_NAMED)}"
        )
    return out


def warnings(report: Report, table: Table) -> list[str]:
    """What changes the reading of the numbers: failed pairs (named, with why), builds that fail
    their preflight, truncated gold sessions, a lane that no longer agrees with its mirror or the
    binary, too few pairs."""
    out = failed_pairs(report) + stale_copies(report)
    for b in report["builds"]:
        if b.get("failed_checks"):
            out.append(
                f"{b['id']} {failed_preflight(b)}; its search does not do what the contract says "
                "(vipune.preflight: record evaluated it anyway)"
            )
    out += truncation_warning(report)
    out += agreement.disagreements(report)
    out += explanations.unexplained(report)
    if table.shows_no_interval():
        out.append(NO_INTERVAL_NOTE)
    return out
