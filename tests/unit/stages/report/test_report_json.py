"""stages/report/report_json.py: report.json has the shape its TypedDicts declare."""

from __future__ import annotations

from vipune_eval.stages.report.report import build


def test_the_documents_have_the_declared_shapes(loaded):
    """The metrics file and report.json hold the keys their TypedDicts declare (issue 28)."""
    from vipune_eval.stages.report.report_json import Report
    from vipune_eval.stages.score import Metrics

    metrics = loaded.views[0].metrics["vipune"]
    assert Metrics.__required_keys__ <= set(metrics) <= set(Metrics.__annotations__)
    report = build(loaded)
    assert set(report) <= set(Report.__annotations__)
    # run_report adds the explanations after build: they read the arms and texts of the pairs it names
    assert set(Report.__annotations__) - set(report) == {"baseline", "whatif", "official", "explanations"}
