"""stages/report/markdown.py: report.md, the document rendered as Markdown."""

from __future__ import annotations

from support.report import markdown_of
from vipune_eval.stages.report.report import build


def test_render_gives_the_headline_table_and_the_sections(loaded):
    report = build(loaded)
    text = markdown_of(report)
    row = next(line for line in text.splitlines() if line.startswith("| vipune |"))
    recall1 = report["retrievers"]["vipune"]["metrics"]["recall@1"]
    assert row.startswith(f"| vipune | 8 | {recall1:.3f} [")
    for heading in (
        "## Overall (95% intervals in brackets)",
        "## recall@10 per category",
        "## Held-out split",
        "## Paired comparisons",
        "## Diagnostics",
        "## Embed throughput",
    ):
        assert heading in text
    assert "**vipune vs dense**" in text
