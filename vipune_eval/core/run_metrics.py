"""A run's metrics file, ``{view}metrics/{run}.json``: its means, intervals and per-pair rows.

Its shape, shared by its writer (stages.score.run_score) and its readers: the report keeps each
run's numbers without its per-pair rows, per-split means and settings (``RetrieverEntry``, one
retriever in one view of report.json); the gate and explain read the rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from vipune_eval.core.failed_pair import FailedPair


class Summary(TypedDict):
    """Means of a group of pairs (every metric key: ``mean``) with ``pairs`` and ``intervals``."""

    pairs: int
    intervals: dict[str, list[float] | None]  # None: too few pairs for a bootstrap (score.metric_intervals)


def mean(summary: Summary, key: str) -> float:
    """A group's mean of a metric key (one key per measure and k: beyond what a TypedDict can name)."""
    loose: Mapping[str, Any] = summary
    value: float = loose[key]
    return value


class _Entry(TypedDict):
    run: str  # the merged run file
    pairs: int  # pairs averaged (failed pairs left out)
    failed: dict[str, FailedPair]  # question id → why the search failed it (vipune.on_error: record)
    metrics: dict[str, float]  # metric key → mean over the averaged pairs
    intervals: dict[str, list[float] | None]  # metric key → 95% interval (None: too few pairs)
    per_category: dict[str, Summary]
    short_lists: int  # pairs whose run lists fewer documents than the largest k


class RetrieverEntry(_Entry, total=False):
    """A run's numbers without its per-pair rows, per-split means and settings: one retriever in
    one view of report.json (stages.report.report.retriever_entry). The keys below are written
    only for the official protocol (its second question set, print_retrieval_metrics.py's) and
    the lanes (search latencies)."""

    pairs_all: int
    metrics_all: dict[str, float]
    intervals_all: dict[str, list[float] | None]
    search_seconds: dict[str, float]  # p50, p95, max, calls


class _Scored(RetrieverEntry):
    retriever: str
    per_split: dict[str, Summary]
    per_query: dict[str, dict[str, Any]]  # metric values, question_type, split, ranked documents
    scored_with: dict[str, Any]  # the Scoring it was made with (core.report_inputs.ScoredWith; the report checks it)


class Metrics(_Scored, total=False):
    """A run's metrics file (stages.score.run_score writes it, stages.report.report reads it)."""

    searched: dict[str, Any]  # the lanes': what their searches were made from (score.read_status)
