"""LongMemEval's own retrieval metrics, ported from src/retrieval/eval_utils.py (commit 9e0b455).

The formulas follow its code exactly, on a ranked list of document ids:
- ``recall_any@k``: 1 if any gold id is in the top k; ``recall_all@k``: 1 if all are (so 1 for a
  pair with no gold, as its ``all([])`` gives);
- ``ndcg_any@k``: DCG = rel_1 + Σ_{i=2..k} rel_i / log2 i (ranks 1 and 2 both undiscounted), the
  ideal DCG from the corpus's relevances sorted and cut to k, 0 when the ideal is 0;
- turn→session (``evaluate_retrieval_turn2session``): turn ids lose their last ``_n``; k grows
  until the top k turns hold k distinct stripped ids, and the three metrics are taken on the
  stripped turn list at that k (so nDCG counts turn positions).

A session id listed twice in one haystack is two corpus items with one id in LongMemEval (its
``process_item_flat_index`` never deduplicates). A run file cannot list a document twice, so the
n-th listing's documents end in ``COPY_MARK`` + n (``copy_id``), and the score stage reads them
under their own id again (``base_id``) before these functions see them: the ranked lists are
LongMemEval's, copies included.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

COPY_MARK = "#copy"


def copy_id(doc: str, n: int) -> str:
    """A document (session or turn id) of the n-th (n >= 2) listing of a session in one haystack."""
    return f"{doc}{COPY_MARK}{n}"


def base_id(doc: str) -> str:
    head, mark, n = doc.rpartition(COPY_MARK)
    return head if mark and n.isdigit() else doc


def dcg(relevances: Sequence[float], k: int) -> float:
    rel = list(relevances)[:k]
    if not rel:
        return 0.0
    return rel[0] + sum(r / math.log2(i) for i, r in enumerate(rel[1:], start=2))


def evaluate(ranked: Sequence[str], gold: Sequence[str], k: int, relevant_in_corpus: int) -> dict[str, float]:
    """``relevant_in_corpus``: how many corpus items are relevant (the ideal DCG's ones)."""
    gold_set = set(gold)
    recalled = set(ranked[:k])
    ideal = dcg([1.0] * relevant_in_corpus, k)
    actual = dcg([1.0 if doc in gold_set else 0.0 for doc in ranked[:k]], k)
    return {
        "recall_any": float(any(g in recalled for g in gold_set)),
        "recall_all": float(all(g in recalled for g in gold_set)),
        "ndcg_any": 0.0 if ideal == 0 else actual / ideal,
    }


def strip_turn_id(doc: str) -> str:
    return "_".join(doc.split("_")[:-1])


def evaluate_turn_to_session(ranked_turns: Sequence[str], gold_turns: Sequence[str], k: int) -> dict[str, float]:
    """Session-level scores of a turn ranking, by LongMemEval's rule (see the module docstring)."""
    stripped = [strip_turn_id(doc) for doc in ranked_turns]
    gold = sorted({strip_turn_id(doc) for doc in gold_turns})
    effective = k
    while effective <= len(stripped) and len(set(stripped[:effective])) < k:
        effective += 1
    # Relevant corpus items are the turns whose stripped id is a gold session: the gold turns.
    return evaluate(stripped, gold, effective, relevant_in_corpus=len(set(gold_turns)))
