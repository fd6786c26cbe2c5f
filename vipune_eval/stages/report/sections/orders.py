"""The orders a reader sees measures, granularities and retrievers in: set here, never taken from a
mapping (report.json's keys are sorted, and report.md, the HTML page and the summary render it
after its round trip through JSON)."""

from __future__ import annotations

from typing import Any, Collection, Mapping, TypeVar

from vipune_eval.registry import granularities, measures
from vipune_eval.stages.report.report_json import Report, RetrieverEntry

T = TypeVar("T")


def by_measure(names: Collection[str]) -> list[str]:
    """Measure names in the registry's order."""
    return [m.name for m in measures.MEASURES if m.name in names]


def by_granularity(names: Any) -> list[str]:
    return [g for g in granularities.NAMES if g in names] + [g for g in names if g not in granularities.NAMES]


def by_retriever(report: Report, rows: Mapping[str, T]) -> dict[str, T]:
    """``rows`` (retriever → anything) in the report's order of retrievers, vipune's lanes first."""
    order = [n for n in report["retriever_order"] if n in rows]
    return {n: rows[n] for n in order + sorted(set(rows) - set(order))}


def ordered(report: Report) -> dict[str, RetrieverEntry]:
    """The primary view's retrievers in the report's order (vipune's lanes first)."""
    return by_retriever(report, report["retrievers"])
