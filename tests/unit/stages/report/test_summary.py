"""stages/report/summary.py: what a finished run prints last."""

from __future__ import annotations

from vipune_eval.stages.report.report import build


def test_the_summary_a_finished_run_prints_last(loaded):
    """Issue 31: about 30 lines a person reads: the headline table (vipune first), warnings that
    change the reading, and where the files are; not report.json."""
    from support.report import summary_of
    from vipune_eval.stages.report import summary

    report = build(loaded)
    lines = summary_of(report).splitlines()
    assert len(lines) <= 30
    start = lines.index("retriever  pairs       recall@1       recall@5      recall@10")
    assert [line.split()[0] for line in lines[start + 1 : start + 4]] == ["vipune", "dense", "hybrid"]
    recall = report["retrievers"]["vipune"]["metrics"]
    assert lines[start + 1].split()[1:3] == ["8", f"{recall['recall@1']:.3f}"]
    warnings = lines[lines.index("warnings:") + 1 : lines.index("files:") - 1]
    assert any("1 pairs have a truncated gold session" in w for w in warnings)
    assert any("fewer than 10 pairs, too few for a bootstrap interval" in w for w in warnings)
    assert lines[-3:] == [f"  {path:<22} {what}" for path, what in summary.FILES]
