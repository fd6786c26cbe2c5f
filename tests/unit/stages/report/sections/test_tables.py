"""stages/report/sections/tables.py: the tables of retrievers every section draws."""

from __future__ import annotations

from support.report import markdown_of
from vipune_eval.stages.report.report import build


def test_fewer_than_ten_pairs_get_no_bootstrap_interval_and_the_report_says_so(loaded):
    """Issue 31: 2 pairs of 1.0 used to read 1.000 [1.00, 1.00]. The score stage writes no
    interval for a fractional metric over fewer than 10 pairs; Wilson intervals stay."""
    vipune = loaded.views[0].metrics["vipune"]
    multi = vipune["per_category"]["multi-session"]
    assert multi["pairs"] == 2 and multi["recall@10"] == 1.0
    assert multi["intervals"]["recall@10"] is None and multi["intervals"]["mrr"] is None
    low, high = multi["intervals"]["recall_any@10"]  # Wilson on 2 of 2: wide, not [1, 1]
    assert low < 0.5 and high == 1.0
    assert vipune["intervals"]["recall@1"] is None  # 8 pairs overall
    text = markdown_of(build(loaded))
    table = text[text.index("## recall@10 per category") : text.index("## Held-out split")]
    assert "| retriever | multi-session (2 pairs) | temporal-reasoning (6 pairs) |" in table
    assert "| vipune | 1.000 [no CI] |" in table
    assert "fewer than 10 pairs, too few for a bootstrap interval" in table
