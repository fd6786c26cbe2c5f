"""Metric definitions checked on hand-worked examples, through the real ir-measures path."""

import math

import pytest

from vipune_eval.io import EvalError
from vipune_eval.score import per_query, read_run, run_score


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


QRELS = {"q1": {"g1": 1, "g2": 1}, "q2": {"g3": 1}, "q3": {"g4": 1}}
RUN = {  # q3 retrieved nothing: it must count as 0, not vanish from the average
    "q1": [("x", 1, 3.0), ("g2", 2, 2.0), ("g1", 3, 1.0)],
    "q2": [("g3", 1, 2.0), ("y", 2, 1.0)],
}


def test_per_query_values_match_hand_computation():
    v = per_query(QRELS, RUN, [1, 2, 3])
    assert v["q1"]["recall@1"] == 0.0
    assert v["q1"]["recall@2"] == 0.5
    assert v["q1"]["recall@3"] == 1.0
    assert v["q1"]["recall_any@2"] == 1.0 and v["q1"]["recall_any@1"] == 0.0
    assert v["q1"]["recall_all@2"] == 0.0 and v["q1"]["recall_all@3"] == 1.0
    assert v["q1"]["mrr"] == pytest.approx(0.5)
    ideal = 1 + 1 / math.log2(3)
    assert v["q1"]["ndcg@3"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / ideal)
    assert v["q1"]["ndcg@2"] == pytest.approx((1 / math.log2(3)) / ideal)
    assert v["q2"]["recall@1"] == 1.0 and v["q2"]["ndcg@1"] == 1.0 and v["q2"]["mrr"] == 1.0
    assert all(value == 0.0 for value in v["q3"].values())


def test_run_score_averages_over_all_pairs_and_per_category(tmp_path):
    qrels = write(tmp_path / "qrels", [f"{q} 0 {d} 1" for q, docs in QRELS.items() for d in docs])
    run = write(tmp_path / "run", [f"{q} Q0 {d} {r} {s} t" for q, hits in RUN.items() for d, r, s in hits])
    categories = {"q1": "multi-session", "q2": "single-session-user", "q3": "single-session-user"}
    result = run_score(qrels, categories, [run], [1, 3], "t", tmp_path / "out.run", tmp_path / "m.json")
    assert result["pairs"] == 3
    assert result["metrics"]["recall@1"] == pytest.approx((0 + 1 + 0) / 3)
    assert result["metrics"]["recall@3"] == pytest.approx((1 + 1 + 0) / 3)
    assert result["metrics"]["mrr"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert result["per_category"]["single-session-user"]["pairs"] == 2
    assert result["per_category"]["single-session-user"]["recall@1"] == pytest.approx(0.5)
    assert result["per_category"]["multi-session"]["recall_all@3"] == 1.0
    assert (tmp_path / "out.run").read_text().splitlines()[0] == "q1 Q0 x 1 3 t"


def test_run_with_ties_or_unknown_pairs_is_refused(tmp_path):
    tied = write(tmp_path / "tied", ["q1 Q0 a 1 1 t", "q1 Q0 b 2 1 t"])
    with pytest.raises(EvalError, match="strictly decreasing"):
        read_run([tied])
    qrels = write(tmp_path / "qrels", ["q1 0 a 1"])
    other = write(tmp_path / "other", ["zz Q0 a 1 1 t"])
    with pytest.raises(EvalError, match="not in"):
        run_score(qrels, {"q1": "c"}, [other], [1], "t", tmp_path / "o", tmp_path / "m")
