"""Metric definitions checked on hand-worked examples, through the real ir-measures path and the
port of LongMemEval's eval_utils.py."""

import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vipune_eval.core import longmemeval
from vipune_eval.core.ranking_settings import RankingSettings
from vipune_eval.core.trec import read_run
from vipune_eval.errors import EvalError
from vipune_eval.stages.filter.pairs import PAIRS_SCHEMA
from vipune_eval.stages.score import Scoring, per_query, run_score


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


def test_longmemevals_ndcg_leaves_ranks_1_and_2_undiscounted():
    # gold at ranks 2 and 3 of [x, g1, g2]: DCG = 0 + 1 + 1/log2 3, ideal = 1 + 1 (ranks 1, 2)
    scores = longmemeval.evaluate(["x", "g1", "g2"], ["g1", "g2"], 3, relevant_in_corpus=2)
    assert scores["ndcg_any"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    assert scores["recall_any"] == scores["recall_all"] == 1.0
    # rank 1 and rank 2 weigh the same: [x, g] and [g, x] with one gold both give 1/1 = 1 vs 1
    assert longmemeval.evaluate(["x", "g"], ["g"], 2, 1)["ndcg_any"] == 1.0
    assert longmemeval.evaluate(["g", "x"], ["g"], 2, 1)["ndcg_any"] == 1.0
    assert longmemeval.dcg([1, 1, 1], 3) == pytest.approx(2 + 1 / math.log2(3))
    # trec_eval (ir-measures) discounts rank 2: the two definitions differ on the same ranking
    trec = per_query({"q": {"g": 1}}, {"q": [("x", 1, 2.0), ("g", 2, 1.0)]}, [2], ("ndcg",))["q"]["ndcg@2"]
    assert trec == pytest.approx(1 / math.log2(3))
    # an example worked in LongMemEval's own code: ids [a, answer_x, b, answer_y], ranking
    # [a, b, answer_x, answer_y], k = 5 → (1/log2 3 + 1/2) / 2
    assert longmemeval.evaluate(["a", "b", "answer_x", "answer_y"], ["answer_x", "answer_y"], 5, 2)[
        "ndcg_any"
    ] == pytest.approx((1 / math.log2(3) + 0.5) / 2)


def test_longmemevals_recall_all_is_one_for_a_pair_without_gold():
    assert longmemeval.evaluate(["a", "b"], [], 5, 0) == {"recall_any": 0.0, "recall_all": 1.0, "ndcg_any": 0.0}


def test_turn_to_session_grows_k_and_keeps_noans_turns_apart():
    """The example checked against LongMemEval's evaluate_retrieval_turn2session."""
    ranked = ["s1_1", "s1_3", "noans_s3_3", "s2_1", "answer_s3_1", "s4_1"]
    at3 = longmemeval.evaluate_turn_to_session(ranked, ["answer_s3_1"], 3)
    assert at3 == {"recall_any": 0.0, "recall_all": 0.0, "ndcg_any": 0.0}  # k grew to 4
    at4 = longmemeval.evaluate_turn_to_session(ranked, ["answer_s3_1"], 4)
    assert at4["recall_any"] == at4["recall_all"] == 1.0  # k grew to 5
    assert at4["ndcg_any"] == pytest.approx(1 / math.log2(5))


def pairs_file(tmp_path, categories, gold, source="answer_session_ids"):
    rows = [
        {
            "question_id": q,
            "question_type": c,
            "question": "?",
            "question_date": "",
            "split": "dev" if i % 2 else "test",
            "gold": gold[q],
            "gold_source": source,
            "session_ids": gold[q],
        }
        for i, (q, c) in enumerate(categories.items())
    ]
    path = tmp_path / "pairs.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=PAIRS_SCHEMA), path)
    return path


def test_run_score_averages_over_all_pairs_per_category_and_split(tmp_path):
    qrels = write(tmp_path / "qrels", [f"{q} 0 {d} 1" for q, docs in QRELS.items() for d in docs])
    run = write(tmp_path / "run", [f"{q} Q0 {d} {r} {s} t" for q, hits in RUN.items() for d, r, s in hits])
    categories = {"q1": "multi-session", "q2": "single-session-user", "q3": "single-session-user"}
    pairs = pairs_file(tmp_path, categories, {q: list(d) for q, d in QRELS.items()})
    scoring = Scoring([1, 3], ["recall", "recall_any", "recall_all", "ndcg", "mrr"], RankingSettings(10, 10))
    result = run_score(qrels, pairs, [run], scoring, "t", tmp_path / "out.run", tmp_path / "m.json")
    assert result["pairs"] == 3
    assert result["metrics"]["recall@1"] == pytest.approx((0 + 1 + 0) / 3)
    assert result["metrics"]["recall@3"] == pytest.approx((1 + 1 + 0) / 3)
    assert result["metrics"]["mrr"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert result["per_category"]["single-session-user"]["pairs"] == 2
    assert result["per_category"]["single-session-user"]["recall@1"] == pytest.approx(0.5)
    assert result["per_category"]["multi-session"]["recall_all@3"] == 1.0
    assert result["per_split"]["dev"]["pairs"] == 1 and result["per_split"]["dev"]["recall@1"] == 1.0
    assert (tmp_path / "out.run").read_text().splitlines()[0] == "q1 Q0 x 1 3 t"
    assert result["short_lists"] == 2  # q2 and q3 hold fewer documents than the largest k
    # what it was scored with, and the ranking its searches were made with, as the report checks them
    assert result["scored_with"] == {
        "ks": [1, 3],
        "measure_names": ["recall", "recall_any", "recall_all", "ndcg", "mrr"],
        "ranking_settings": {"limit": 10, "depth": 10, "collapse": True},
        "turn_to_session": False,
    }


def test_run_with_ties_repeats_or_unknown_pairs_is_refused(tmp_path):
    tied = write(tmp_path / "tied", ["q1 Q0 a 1 1 t", "q1 Q0 b 2 1 t"])
    with pytest.raises(EvalError, match="strictly decreasing"):
        read_run([tied])
    repeated = write(tmp_path / "rep", ["q1 Q0 a 1 2 t", "q1 Q0 a 2 1 t"])
    with pytest.raises(EvalError, match="lists a document twice"):
        read_run([repeated])
    qrels = write(tmp_path / "qrels", ["q1 0 a 1"])
    pairs = pairs_file(tmp_path, {"q1": "c"}, {"q1": ["a"]})
    other = write(tmp_path / "other", ["zz Q0 a 1 1 t"])
    with pytest.raises(EvalError, match="not in"):
        run_score(
            qrels,
            pairs,
            [other],
            Scoring([1], ["recall"], RankingSettings(10, 10)),
            "t",
            tmp_path / "o",
            tmp_path / "m",
        )


def test_a_repeated_session_counts_twice_in_the_ranking_as_in_longmemeval():
    """Hand-worked: LongMemEval ranks [f, f, answer_a, b] (f listed twice in the haystack); the
    run file names the second listing f#copy2 and the official scores read it as f."""
    run = {"q": [("f", 1, 4.0), ("f#copy2", 2, 3.0), ("answer_a", 3, 2.0), ("b", 4, 1.0)]}
    v = per_query({"q": {"answer_a": 1}}, run, [2, 3], ("recall_any", "ndcg_any"), official=True)["q"]
    assert v["ndcg_any@3"] == pytest.approx(1 / math.log2(3))  # rank 3, not rank 2 (1.0)
    assert v["recall_any@2"] == 0.0 and v["recall_any@3"] == 1.0
    # turn level: both listings' turns are session f, so k grows past them
    turns = {"q": [("f_1", 1, 3.0), ("f_1#copy2", 2, 2.0), ("answer_a_1", 3, 1.0)]}
    at2 = per_query(
        {"q": {"answer_a_1": 1}},
        turns,
        [2],
        ("recall_any", "recall_all", "ndcg_any"),
        official=True,
        turn_to_session=True,
    )["q"]
    assert at2 == {"recall_any@2": 1.0, "recall_all@2": 1.0, "ndcg_any@2": pytest.approx(1 / math.log2(3))}
    assert longmemeval.base_id("x_3#copy12") == "x_3" and longmemeval.base_id("x#copyright") == "x#copyright"


def test_a_measure_ir_measures_lacks_is_scored_by_its_own_compute(monkeypatch):
    """score names no measure (issue 42): one the table gives a compute is scored by it, beside
    the ir-measures ones."""
    from vipune_eval.registry import measures

    hits = measures.Measure(
        "hits",
        False,
        True,
        "gold documents in the top k",
        compute=lambda ranked, gold, k: float(len(set(gold) & set(ranked[:k]))),
    )
    monkeypatch.setitem(measures.BY_NAME, "hits", hits)
    v = per_query(QRELS, RUN, [2, 3], ("recall", "hits"))
    assert (v["q1"]["hits@2"], v["q1"]["hits@3"], v["q1"]["recall@3"]) == (1.0, 2.0, 1.0)
    assert v["q3"] == {"recall@2": 0.0, "recall@3": 0.0, "hits@2": 0.0, "hits@3": 0.0}


def test_what_the_lanes_searched_reaches_the_metrics_and_an_older_shard_says_nothing(tmp_path):
    """Issue 52: a lane's status files say what its searches were made from (their settings, each
    pair's digests); the score stage keeps it for the gate, and where one shard does not say
    (an older harness wrote it) the run claims nothing."""
    from vipune_eval.stages.score import read_status

    settings = {"flags": ["--recency", "0", "--limit", "10", "--no-touch"], "depth": 10, "collapse": True}
    shards = []
    for i, (qid, digests) in enumerate([("q1", ["a" * 16, "b" * 16]), ("q2", ["c" * 16, "d" * 16])]):
        shards.append(
            write(
                tmp_path / f"s{i}.json",
                [
                    json.dumps(
                        {
                            "failed": {},
                            "search_seconds": {qid: 0.1},
                            "searched": {"settings": settings, "personas": {qid: digests}},
                        }
                    )
                ],
            )
        )
    _, _, searched = read_status(shards)
    assert searched == {"settings": [settings], "personas": {"q1": ["a" * 16, "b" * 16], "q2": ["c" * 16, "d" * 16]}}
    older = write(tmp_path / "old.json", [json.dumps({"failed": {}, "search_seconds": {"q3": 0.1}})])
    assert read_status([*shards, older])[2] is None and read_status([])[2] is None
