"""Published figures of LongMemEval's paper, and our runs beside them with the corpus of each."""

from __future__ import annotations

from vipune_eval.core.report_inputs import Corpus
from vipune_eval.stages.report.report_json import BesidePublished, Published, RetrieverEntry

# LongMemEval's paper, LongMemEval_M, value = session, key = value; numbers NOT read from the paper
# here (it cannot be fetched on these machines) but as quoted from its Table 9 in the project's
# GitHub issue xiaowu0162/LongMemEval#27. "Recall" there is LongMemEval's recall_all, and its
# figures are print_retrieval_metrics.py's averages over every non-abstention pair: our
# `metrics_all` of the bm25-lme retriever (LongMemEval's own BM25) is the number beside them.
PUBLISHED: Published = {
    "source": "LongMemEval paper (Wu et al., ICLR 2025), Table 9, LongMemEval_M, value = session, "
    "key = V, as quoted in github.com/xiaowu0162/LongMemEval/issues/27 — not checked "
    "against the paper here; Contriever and Stella figures were not available",
    "corpus": "the paper's: LongMemEval_M of the original release (xiaowu0162/longmemeval, "
    "longmemeval_m), every non-abstention pair (print_retrieval_metrics.py)",
    "retrievers": {
        "BM25 (rank_bm25)": {"recall_all@5": 0.634, "recall_all@10": 0.710, "ndcg_any@5": 0.516, "ndcg_any@10": 0.540}
    },
    "ours": {"BM25 (rank_bm25)": "bm25-lme"},  # the configured retriever that reproduces each row
}


def corpus_text(corpus: Corpus | None) -> str:
    if not corpus:
        return "this run's dataset"
    return f"ours: {corpus['preset'] or corpus['release']} ({corpus['source']}; {corpus['note']})"


def beside_published(retrievers: dict[str, RetrieverEntry], corpus: Corpus | None) -> dict[str, BesidePublished]:
    """Each published row beside the configured retriever that reproduces it (its `metrics_all`,
    the set the paper's script averages, and its `metrics`), naming the corpus of each; nothing
    unless this run scored the paper's corpus (LongMemEval_M of the original release, a local
    copy identified by its sha256)."""
    out: dict[str, BesidePublished] = {}
    if not (corpus and corpus["same_as_paper"]):
        return out
    for paper, ours in PUBLISHED["ours"].items():
        if ours not in retrievers:
            continue
        entry = retrievers[ours]
        keys = PUBLISHED["retrievers"][paper]
        out[paper] = {
            "retriever": ours,
            "paper": keys,
            "paper_corpus": PUBLISHED["corpus"],
            "ours_corpus": corpus_text(corpus),
            "ours_all": {k: entry.get("metrics_all", entry["metrics"])[k] for k in keys},
            "ours_all_pairs": entry.get("pairs_all", entry["pairs"]),
            "ours": {k: entry["metrics"][k] for k in keys},
            "ours_pairs": entry["pairs"],
        }
    return out
