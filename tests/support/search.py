"""Reference searches in one call, for tests: every retriever of a persona from one computation of
its arms, and plain RRF as an independent oracle of the hybrid family."""

from __future__ import annotations

from typing import Any

from vipune_eval.core.persona import Persona, Ranking
from vipune_eval.registry import retrievers as registry
from vipune_eval.registry.retrievers import Kind
from vipune_eval.stages.search import rankers
from vipune_eval.stages.search.arms import persona_arms

RRF_K = 25


def rrf(rankings: list[Ranking], limit: int) -> Ranking:
    """Reciprocal rank fusion, k = 25, ranks from 1; ties to the smaller id; truncated to limit."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, (rid, _) in enumerate(ranking, start=1):
            scores[rid] = scores.get(rid, 0.0) + 1.0 / (RRF_K + rank)
    fused = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return fused[:limit]


def search_persona(persona: Persona, retrievers: list[Any], limit: int,
                   rank_all: bool = False) -> dict[str, Ranking]:
    """Rankings of ``persona``'s question by each reference retriever (preset names or
    registry.retrievers specs), all from one computation of its arms. The fusions follow
    vipune at ``limit``; with ``rank_all`` the single arms rank every row (turn and chunk rows,
    whose rankings collapse to sessions), else their first ``limit``."""
    specs = [r if isinstance(r, registry.Spec) else registry.spec(r) for r in retrievers]
    arms = persona_arms(persona) if any(s.kind is Kind.ARMS for s in specs) else None
    out = {}
    for s in specs:
        source = arms if s.kind is Kind.ARMS else persona
        indices, scores = rankers.rank(source, s, limit, rank_all)
        out[s.name] = [(persona.row_ids[i], float(v)) for i, v in zip(indices.tolist(), scores.tolist())]
    return out
