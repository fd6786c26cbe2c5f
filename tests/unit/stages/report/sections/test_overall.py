"""stages/report/sections/overall.py: the primary view's numbers."""

from __future__ import annotations

from vipune_eval.stages.report.build import build
from vipune_eval.stages.report.sections import overall

from support.report import loaded  # noqa: F401 (the fixture)


def test_the_headline_gives_each_retriever_its_pairs_and_recall_at_every_k_vipune_first(loaded):
    report = build(loaded)
    table = overall.headline(report)
    assert table.columns == ["retriever", "pairs", "recall@1", "recall@5", "recall@10"]
    assert [row[0] for row in table.rows] == ["vipune", "dense", "hybrid"] and table.marked == frozenset({0})
    recall = report["retrievers"]["dense"]["metrics"]["recall@1"]
    assert table.rows[1][1:3] == ["8", f"{recall:.3f} [no CI]"]


def test_the_notes_give_the_pairs_per_category_and_every_measure(loaded):
    [notes] = overall.notes_section(build(loaded))
    counts, measures = (block.text for block in notes.blocks)
    assert counts == "Pairs per category: multi-session 2, temporal-reasoning 6"
    assert measures.startswith("Measures: recall: ") and "left out of every average" in measures
