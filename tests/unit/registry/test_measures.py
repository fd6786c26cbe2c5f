"""The table of measures: each measure says what computes it, so the score stage names none
(issue 42 item 3)."""

import pytest

from vipune_eval.core import longmemeval
from vipune_eval.registry import measures
from vipune_eval.registry.measures import IR_MEASURES, OWN, Measure


def test_every_measure_of_a_protocol_has_something_that_computes_it():
    assert {measures.BY_NAME[n].computed_by(official=False) for n in measures.SEED} <= {IR_MEASURES, OWN}
    for name in (*measures.OFFICIAL, *measures.OFFICIAL_TURN):
        measures.BY_NAME[name].computed_by(official=True)
    # ndcg_any is LongMemEval's alone: asking the seed protocol for it is refused, never a silent 0
    with pytest.raises(ValueError, match="ndcg_any is LongMemEval's alone"):
        measures.BY_NAME["ndcg_any"].computed_by(official=False)


def test_what_longmemevals_code_computes_is_what_the_table_says_it_defines():
    """The official protocol reads a measure's value from core.longmemeval under its name."""
    said = set(longmemeval.evaluate(["a"], ["a"], 1, 1)) | set(
        longmemeval.evaluate_turn_to_session(["a_1"], ["a_1"], 1)
    )
    assert said == {m.name for m in measures.MEASURES if m.longmemeval}
    assert set(measures.OFFICIAL_TURN) == {m.name for m in measures.MEASURES if m.longmemeval}


def test_a_measure_is_computed_by_ir_measures_or_by_its_own_compute_never_both_or_neither():
    with pytest.raises(ValueError, match="not both"):
        Measure("x", False, True, "x", ir_measures="R@{k}", compute=lambda ranked, gold, k: 0.0)
    with pytest.raises(ValueError, match="nothing computes it"):
        Measure("x", False, True, "x")


def test_recall_all_is_every_gold_document_in_the_top_k():
    compute = measures.BY_NAME["recall_all"].compute
    assert compute(["a", "g1", "g2"], ["g1", "g2"], 3) == 1.0
    assert compute(["a", "g1", "g2"], ["g1", "g2"], 2) == 0.0
    assert compute([], ["g1"], 5) == 0.0 and compute(["a"], [], 5) == 0.0  # the seed protocol's pairs have gold
