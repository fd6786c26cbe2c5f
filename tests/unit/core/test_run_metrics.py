"""core/run_metrics.py: a run's metrics file has the keys its shape declares, as the score stage
writes it, and report.json keeps of it the keys of a retriever's entry (a TypedDict is not checked
when the file is read back)."""

from __future__ import annotations

from support.report import metrics
from vipune_eval.core.run_metrics import Metrics, RetrieverEntry, mean
from vipune_eval.stages.report.report import retriever_entry


def test_the_score_writes_the_declared_keys_and_the_report_keeps_the_entrys(tmp_path):
    written = metrics(tmp_path, "vipune")
    assert Metrics.__required_keys__ <= set(written) <= set(Metrics.__annotations__)
    entry = retriever_entry(written)
    assert set(entry) == set(written) & set(RetrieverEntry.__annotations__)
    assert {"per_query", "per_split", "scored_with", "retriever"}.isdisjoint(entry)
    assert RetrieverEntry.__required_keys__ <= set(entry)
    group = entry["per_category"]["multi-session"]
    assert mean(group, "recall@5") == written["per_category"]["multi-session"]["recall@5"]
