"""The warnings, what changes the reading of the numbers (first in report.md, the summary and the
HTML report's first page): failed pairs (named, with why), builds that fail their preflight,
truncated gold sessions, a lane that no longer agrees with its mirror or the binary
(stages.report.sections.agreement), and tables too small for an interval."""

from __future__ import annotations

from vipune_eval.stages.report.document import NO_INTERVAL_NOTE, Table
from vipune_eval.stages.report.report_json import Report
from vipune_eval.stages.report.sections import agreement
from vipune_eval.stages.report.sections.misses import truncation_warning
from vipune_eval.stages.report.sections.vipune_builds import failed_preflight
from vipune_eval.vipune.contract import EXIT_TOO_LONG

PAIRS_NAMED = 10       # a warning names at most this many failed pairs
# What a vipune exit code means when a search ends with it (docs/vipune-contract.md)
REFUSALS = {EXIT_TOO_LONG: "vipune refuses a question over 512 tokens"}


def failure_reason(message: str) -> str:
    """Why a pair failed, in a few words: what vipune's exit code means where the contract names
    it, else the exit code (the message is vipune.client's: ``… `COMMAND` exited N: …``)."""
    rest = message.partition("` exited ")[2]
    code = rest.split(":", 1)[0].split(" ", 1)[0]
    if not code.lstrip("-").isdigit():
        return "the pairs"
    refusal = REFUSALS.get(int(code))
    return f"{refusal} (exit {code})" if refusal else f"vipune exited {code}"


def failed_pairs(report: Report) -> list[str]:
    """The pairs a lane failed (vipune.on_error: record), named, with why: one line per reason
    and set of retrievers (vipune's two lanes fail the same personas)."""
    failed: dict[tuple[str, str], list[str]] = {}  # (pair, why) → the retrievers that failed it
    for name in report["retriever_order"]:
        messages = report["retrievers"][name].get("failed") or {}
        for qid in sorted(messages):
            failed.setdefault((qid, failure_reason(messages[qid])), []).append(name)
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}  # (why, retrievers) → pairs
    for (qid, reason), names in failed.items():
        groups.setdefault((reason, tuple(names)), []).append(qid)
    out = []
    for (reason, names), qids in groups.items():
        more = len(qids) - PAIRS_NAMED
        shown = ", ".join(qids[:PAIRS_NAMED]) + (f" and {more} more" if more > 0 else "")
        many = len(qids) != 1
        out.append(f"{' and '.join(names)}: {len(qids)} pair{'s' if many else ''} failed and {'are' if many else 'is'} "
                   f"left out of every average (vipune.on_error: record; report.json lists why); {reason}: {shown}")
    return out


def warnings(report: Report, table: Table) -> list[str]:
    """What changes the reading of the numbers: failed pairs (named, with why), builds that fail
    their preflight, truncated gold sessions, a vipune lane that no longer agrees with its mirror,
    too few pairs."""
    out = failed_pairs(report)
    for b in report["builds"]:
        if b.get("failed_checks"):
            out.append(f"{b['id']} {failed_preflight(b)}; its search does not do what the contract says "
                       "(vipune.preflight: record evaluated it anyway)")
    out += truncation_warning(report)
    out += agreement.warnings(report)
    if table.shows_no_interval():
        out.append(NO_INTERVAL_NOTE)
    return out
