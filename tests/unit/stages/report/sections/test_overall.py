"""stages/report/sections/overall.py: the primary view's numbers."""

from __future__ import annotations

from support.report import (
    metrics,
)
from vipune_eval.core.failed_pair import failed_pair
from vipune_eval.stages.report.report import build
from vipune_eval.stages.report.sections import overall


def test_the_headline_gives_each_retriever_its_pairs_and_recall_at_every_k_vipune_first(loaded):
    report = build(loaded)
    table = overall.headline(report)
    assert table.columns == ["retriever", "pairs", "recall@1", "recall@5", "recall@10"]
    assert [row[0] for row in table.rows] == ["vipune", "dense", "hybrid"] and table.marked == frozenset({0})
    recall = report["retrievers"]["dense"]["metrics"]["recall@1"]
    assert table.rows[1][1:3] == ["8", f"{recall:.3f} [no CI]"]


def test_the_split_table_gives_each_retriever_the_pairs_it_scored_on_the_test_split(loaded, tmp_path):
    """A failed pair (vipune.on_error: record) is not among a retriever's test pairs: its row says
    how many of the split's it scored and how many failed (every row said the split's count)."""
    refused = failed_pair("persona q7: … exited 3: …", 3, "content exceeds 512-token embedding limit")
    loaded.views[0].metrics["vipune"] = metrics(tmp_path / "failed", "vipune", {"q7": refused})
    [section] = overall.split_section(build(loaded))
    table = section.blocks[1]
    assert section.title == "Held-out split: tune on dev (2 pairs), report test (6 pairs)"
    assert {row[0]: row[1] for row in table.rows} == {"vipune": "5 (1 failed)", "dense": "6", "hybrid": "6"}


def test_the_notes_give_the_pairs_per_category_and_every_measure(loaded):
    [notes] = overall.notes_section(build(loaded))
    counts, measures = (block.text for block in notes.blocks)
    assert counts == "Pairs per category: multi-session 2, temporal-reasoning 6"
    assert measures.startswith("Measures: recall: ") and "left out of every average" in measures
