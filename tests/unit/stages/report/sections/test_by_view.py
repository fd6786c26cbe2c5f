"""stages/report/sections/by_view.py: the views beside the primary one."""

from __future__ import annotations

from vipune_eval.stages.report.build import build
from vipune_eval.stages.report.markdown import render

from support.report import loaded  # noqa: F401 (the fixture)


def test_the_official_views_recall_all_convention_is_explained(loaded):
    report = build(loaded)
    session = report["views"]["session"]
    official = {**session, "protocol": "official", "description": "LongMemEval's protocol",
                "measures": {"recall_any": "…", "recall_all": "…"},
                "summary": {**session["summary"], "pairs_all": 8, "skipped_without_user_side_evidence": 3,
                            "skip_rule": "run_retrieval.py's", "pairs_with_empty_gold": 0},
                "retrievers": {n: {**e, "metrics_all": e["metrics"], "intervals_all": e["intervals"], "pairs_all": 8}
                               for n, e in session["retrievers"].items()}}
    report["views"]["official"] = official
    text = render(report)
    assert "`metrics_all` holds the 3 pairs without user-side evidence, every one with no gold, so there " \
           "recall_all can exceed recall_any" in text
