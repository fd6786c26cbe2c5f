"""stages/report/document.py: the blocks every rendering of the report shows."""

from __future__ import annotations

from vipune_eval.stages.report.document import NO_INTERVAL, Table, cell, one_line, plain


def test_a_cell_is_its_value_and_its_interval_or_says_there_is_none():
    assert cell(0.5, [0.25, 0.75]) == "0.500 [0.25, 0.75]"
    assert cell(1.0, None) == f"1.000 [{NO_INTERVAL}]"


def test_a_table_aligns_every_column_but_the_first_right_unless_told_and_knows_a_missing_interval():
    table = Table(["retriever", "pairs", "recall@5"], [["vipune", "8", cell(1.0, None)]])
    assert table.right() == [False, True, True] and table.shows_no_interval()
    other = Table(["a", "b"], [["x", "0.500 [0.25, 0.75]"]], numeric=[False, False])
    assert other.right() == [False, False] and not other.shows_no_interval()


def test_plain_text_drops_the_inline_marks():
    assert plain("**vipune vs dense**: `bm25-lme`") == "vipune vs dense: bm25-lme"


def test_a_text_on_one_line_is_cut_with_an_ellipsis():
    assert one_line("user: a\n  b", 120) == "user: a b"
    long = one_line("x" * 200, 120)
    assert len(long) == 120 and long.endswith("…")
    assert one_line("x" * 120, 120) == "x" * 120
