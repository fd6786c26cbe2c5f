"""How each family ranks: one function per family of registry.retrievers.FAMILIES (a test holds
the two tables to the same names), called by the searches that run family settings (fuse-reference
from the shared arms, search-family from the persona).

Each takes a persona's shared arms (stages.search.arms.Arms: row indices best first and their
scores, per arm) or, for a family of kind PERSONA, the persona itself, then the family's
parameters, the search limit and whether a single arm ranks every row; it returns (row indices,
scores), best first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from vipune_eval.registry.shared_arms import DENSE_ARM, bm25_arm
from vipune_eval.vipune.contract import candidate_pool

if TYPE_CHECKING:
    from vipune_eval.registry.retrievers import Spec


def _arm(name: Callable[[dict], str]) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    def rank(arms: Any, params: dict, limit: int, rank_all: bool) -> tuple[np.ndarray, np.ndarray]:
        indices, scores = arms.ranked[name(params)]
        return (indices, scores) if rank_all else (indices[:limit], scores[:limit])

    return rank


def _fusion(arms: Any, params: dict, limit: int, rank_all: bool) -> tuple[np.ndarray, np.ndarray]:
    """Weighted RRF over the first ``pool`` rows of the dense and bm25 arms: score = sum of
    w / (k + rank), ranks from 1; ties to the smaller row id; truncated to ``limit``."""
    pool = params["pool"] or candidate_pool(limit)
    scores = np.zeros(len(arms.row_ids))
    member = np.zeros(len(arms.row_ids), bool)
    for arm, weight in zip((DENSE_ARM, bm25_arm(params["query"])), params["weights"]):
        top = arms.ranked[arm][0][:pool]
        scores[top] += weight / (params["k"] + np.arange(1, len(top) + 1))
        member[top] = True
    candidates = np.flatnonzero(member)
    best = candidates[np.lexsort((arms.tie[candidates], -scores[candidates]))][:limit]
    return best, scores[best]


def _bm25_lme(persona: Any, params: dict, limit: int, rank_all: bool) -> tuple[np.ndarray, np.ndarray]:
    """LongMemEval's own BM25, as its src/retrieval/run_retrieval.py runs ``flat-bm25`` (commit
    9e0b455): rank_bm25 0.2.2 ``BM25Okapi([doc.split(" ") for doc in corpus])``,
    ``get_scores(question.split(" "))``, order ``np.argsort(scores)[::-1]`` — the same calls, so
    ties fall the same way — over the persona's rows (the view's corpus, in haystack order)."""
    from rank_bm25 import BM25Okapi

    bm25 = BM25Okapi([doc.split(" ") for doc in persona.texts])
    scores = bm25.get_scores(persona.question.split(" "))
    order = np.argsort(scores)[::-1]
    order = order if rank_all else order[:limit]
    return order, scores[order]


RANK: dict[str, Callable[..., tuple[np.ndarray, np.ndarray]]] = {
    "dense": _arm(lambda p: DENSE_ARM),
    "bm25": _arm(lambda p: bm25_arm(p["query"])),
    "hybrid": _fusion,
    "bm25-lme": _bm25_lme,
}


def rank(source: Any, s: Spec, limit: int, rank_all: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Row indices and scores of family setting ``s`` for one persona (its arms, or itself)."""
    return RANK[s.use](source, s.params, limit, rank_all)
