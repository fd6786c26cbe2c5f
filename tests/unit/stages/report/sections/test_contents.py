"""stages/report/sections/contents.py: every section in its order, and what the summary and the
HTML report's first page show of it."""

from __future__ import annotations

from vipune_eval.core import paths
from vipune_eval.stages.report.report import build
from vipune_eval.stages.report.sections.contents import FILES, document


def test_the_warnings_come_first_and_the_notes_last(loaded):
    doc = document(build(loaded))
    keys = [s.key for s in doc.sections]
    assert keys == [
        "warnings",
        "overall",
        "per-category@1",
        "per-category",
        "per-category@10",
        "split",
        "comparisons",
        "diagnostics",
        "worst-pairs",
        "embed",
        "notes",
    ]
    assert doc.section("warnings").blocks[0].items[0].text == doc.warnings[0]
    assert doc.primary_build is None and doc.builds == []  # no vipune build configured


def test_the_files_a_person_opens_report_md_first():
    assert [path for path, _ in FILES] == [paths.REPORT_MD, paths.REPORT_HTML, paths.REPORT_JSON]
