"""The orders a reader sees measures, granularities and retrievers in: set here, never taken from a
mapping (report.json's keys are sorted, and report.md, the HTML page and the summary render it
after its round trip through JSON)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from vipune_eval.registry import granularities, measures
from vipune_eval.stages.report.report_json import Report, RetrieverEntry, primary_ks

T = TypeVar("T")


def by_measure(names: Collection[str]) -> list[str]:
    """Measure names in the registry's order."""
    return [m.name for m in measures.MEASURES if m.name in names]


def table_keys(report: Report) -> list[str]:
    """The primary view's metric keys, every at-k measure at each of its ks, in the registry's
    order of measures: the columns of its tables."""
    return measures.keys(primary_ks(report), by_measure(report["measures"]))


def by_granularity(names: Any) -> list[str]:
    return [g for g in granularities.NAMES if g in names] + [g for g in names if g not in granularities.NAMES]


def by_retriever(report: Report, rows: Mapping[str, T]) -> dict[str, T]:
    """``rows`` (retriever → anything) in the report's order of retrievers, vipune's lanes first."""
    order = [n for n in report["retriever_order"] if n in rows]
    return {n: rows[n] for n in order + sorted(set(rows) - set(order))}


def view_order(report: Report) -> list[str]:
    """Every view's name, the primary first: the seed protocol's granularities, then LongMemEval's
    protocol's, each in the registry's order of granularities."""
    views, rank = report["views"], {g: i for i, g in enumerate(granularities.NAMES)}
    return sorted(
        views,
        key=lambda name: (views[name]["protocol"] != "seed", rank.get(views[name]["granularity"], len(rank)), name),
    )


def and_listed(names: list[str]) -> str:
    """Names as a line lists them, in their order: ``a``, ``a and b``, ``a, b and c``."""
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


def first_named(names: list[str], shown: int) -> str:
    """The first ``shown`` names, then how many more: ``q1, q2 and 3 more``."""
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def in_view(report: Report, *views: str) -> str:
    """How a line names the views it speaks of (``in the turn view``, ``in the session and turn
    views``): not at all where the report has one view."""
    return f" in the {and_listed(list(views))} view{'s' if len(views) > 1 else ''}" if len(report["views"]) > 1 else ""


def ordered(report: Report) -> dict[str, RetrieverEntry]:
    """The primary view's retrievers in the report's order (vipune's lanes first)."""
    return by_retriever(report, report["retrievers"])
