"""stages/report/sections/orders.py: every order a reader sees is set by the sections."""

from __future__ import annotations

from support.report import markdown_of
from vipune_eval.stages.report.report import build


def test_the_document_takes_no_order_from_report_jsons_mappings(loaded):
    """report.md is rendered in the report job and the HTML page from report.json (sorted keys):
    every order a reader sees (measures, retrievers, comparisons, granularities) is set by the
    sections, so any order of report.json's mappings gives the same document."""
    from vipune_eval.stages.report.sections.contents import document

    def reorder(value, reverse):
        if isinstance(value, dict):
            return {k: reorder(value[k], reverse) for k in sorted(value, reverse=reverse)}
        return [reorder(v, reverse) for v in value] if isinstance(value, list) else value

    report = build(loaded)
    assert document(reorder(report, False)) == document(reorder(report, True)) == document(report)
    text = markdown_of(report)
    assert text.index("**vipune vs dense**") < text.index("**vipune vs hybrid**")  # the report's order
    assert "| retriever | pairs | recall@1 | recall@5 | recall@10 | recall_any@1 |" in text
