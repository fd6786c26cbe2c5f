"""stages/report/published.py: the paper's figures, ours beside them only on the paper's corpus."""

from __future__ import annotations

from vipune_eval.stages.report.published import PUBLISHED, beside_published

ENTRY = {
    "pairs": 2,
    "pairs_all": 3,
    "metrics": {"recall_all@5": 0.5, "recall_all@10": 0.6, "ndcg_any@5": 0.4, "ndcg_any@10": 0.45},
    "metrics_all": {"recall_all@5": 0.7, "recall_all@10": 0.8, "ndcg_any@5": 0.3, "ndcg_any@10": 0.35},
}
PAPERS = {"preset": "m", "release": "original", "source": "the hub", "note": "the paper's", "same_as_paper": True}


def test_ours_stands_beside_the_published_row_with_both_question_sets_and_each_corpus():
    [(row, beside)] = beside_published({"bm25-lme": ENTRY}, PAPERS).items()
    assert row == "BM25 (rank_bm25)" and beside["retriever"] == "bm25-lme"
    assert beside["ours_all"] == ENTRY["metrics_all"] and beside["ours_all_pairs"] == 3  # the paper's set
    assert beside["ours"] == ENTRY["metrics"] and beside["ours_pairs"] == 2
    assert beside["paper_corpus"] == PUBLISHED["corpus"] and "the paper's" in beside["ours_corpus"]


def test_nothing_beside_it_on_another_corpus_or_without_the_retriever():
    assert beside_published({"bm25-lme": ENTRY}, {**PAPERS, "same_as_paper": False}) == {}
    assert beside_published({"bm25-lme": ENTRY}, None) == {}
    assert beside_published({"bm25": ENTRY}, PAPERS) == {}
