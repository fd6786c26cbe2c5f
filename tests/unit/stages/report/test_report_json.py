"""stages/report/report_json.py: report.json has the shape its TypedDicts declare."""

from __future__ import annotations

from vipune_eval.stages.report.report import build


def test_the_documents_have_the_declared_shapes(loaded):
    """report.json holds the keys its TypedDicts declare (issue 28; the metrics file's:
    tests/unit/core/test_run_metrics.py)."""
    from vipune_eval.stages.report.report_json import Report

    report = build(loaded)
    assert set(report) <= set(Report.__annotations__)
    # run_report adds the explanations after build: they read the arms and texts of the pairs it names
    assert set(Report.__annotations__) - set(report) == {"baseline", "whatif", "official", "explanations"}
