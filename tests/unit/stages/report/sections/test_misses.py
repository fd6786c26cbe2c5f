"""stages/report/sections/misses.py: report.md's Diagnostics, why vipune misses."""

from __future__ import annotations

from vipune_eval.stages.report.markdown import section
from vipune_eval.stages.report.sections.misses import diagnostics_sections


def test_report_text_when_every_gold_session_is_truncated():
    """Regression: the Markdown crashed when no pair was left without a truncated gold session."""
    report = {
        "diagnostics": {
            "truncation": {
                "truncated_share": 1.0,
                "session_texts": 2,
                "pairs_with_truncated_gold": 1,
                "recall@5": {"x": {"truncated_gold": 0.5, "untruncated_gold": None}},
            },
            "bm25_and_query": None,
            "vipune_vs_hybrid": None,
            "gold_ranks": {"retriever": "x", "pairs": []},
        },
        "retrievers": {},
        "retriever_order": [],
        "views": {"session": {"ks": [5]}},
    }
    text = "\n".join(map(section, diagnostics_sections(report)))
    assert "recall@5 0.500 with truncated gold, – without" in text
