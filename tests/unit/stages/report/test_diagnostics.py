"""Diagnostics on hand-built metrics: truncation split, empty AND query, agreement, gold ranks."""

import pytest

from vipune_eval.stages.report import diagnostics


def per_query(rows):
    return {
        "per_query": {
            q: {"recall@1": r, "mrr": r, "ranked": ranked, "question_type": "c"} for q, (r, ranked) in rows.items()
        }
    }


def test_truncation_splits_recall_by_truncated_gold():
    truncated = {"t1": True, "t2": False, "t3": False}
    pairs = [
        {"question_id": "a", "row_sessions": ["s1", "s2"], "row_text_ids": ["t1", "t2"]},
        {"question_id": "b", "row_sessions": ["s3", "s2"], "row_text_ids": ["t3", "t2"]},
    ]
    metrics = {"x": per_query({"a": (0.0, []), "b": (1.0, ["s3"])})}
    out = diagnostics.truncation(pairs, {"a": {"s1"}, "b": {"s3"}}, truncated, metrics, 1)
    assert out["truncated_share"] == pytest.approx(1 / 3) and out["pairs_with_truncated_gold"] == 1
    assert out["recall@1"]["x"] == {"truncated_gold": 0.0, "untruncated_gold": 1.0}


def test_empty_and_query_and_agreement():
    metrics = {
        "bm25": per_query({"a": (0.0, []), "b": (1.0, ["s1"])}),
        "hybrid": per_query({"a": (1.0, ["s1", "s2"]), "b": (1.0, ["s1"])}),
        "hybrid-or": per_query({"a": (0.0, ["s2", "s1"]), "b": (1.0, ["s1"])}),
        "vipune": per_query({"a": (1.0, ["s1", "s2"]), "b": (1.0, ["s9"])}),
    }
    roles = {"bm25_and": "bm25", "hybrid_and": "hybrid", "hybrid_or": "hybrid-or"}  # retrievers.roles
    empty = diagnostics.empty_and_query(metrics, 1, roles)
    assert empty["bm25_empty_share"] == 0.5 and empty["hybrid_vs_hybrid_or_top1_differs"] == 1
    assert empty["recall@1_on_empty_and_pairs"] == {"hybrid": 1.0, "hybrid-or": 0.0}
    agree = diagnostics.agreement(metrics, [1, 2], "vipune", "hybrid")
    assert agree["same_top1_share"] == 0.5 and agree["differ_top2"] == ["b"]


def test_gold_ranks_worst_first():
    entry = per_query({"a": (1.0, ["g1", "x"]), "b": (0.0, ["x", "y"])})
    rows = diagnostics.gold_ranks(entry, {"a": {"g1"}, "b": {"g2", "x"}}, 1)
    assert [r["question_id"] for r in rows] == ["b", "a"]
    assert rows[0]["gold_ranks"] == {"g2": None, "x": 1} and rows[1]["gold_ranks"] == {"g1": 1}
