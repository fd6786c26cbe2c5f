"""Reference searches in one call, for tests: every retriever of a persona from one computation of
its arms, plain RRF as an independent oracle of the hybrid family, a haystack of repeated
sessions (exact ties), and personas written as a search job reads them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from vipune_eval.core.persona import Persona, Ranking, ShardSearch
from vipune_eval.core.ranking_settings import RankingSettings
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


def search_persona(persona: Persona, retrievers: list[Any], limit: int, rank_all: bool = False) -> dict[str, Ranking]:
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


def duplicated_haystack(seed: int, sessions: int, dims: int = 384) -> Persona:
    """Every session twice, the copy with the same text and date (so a byte-identical vector),
    the copies after the originals, as a haystack holding a session twice is imported: vipune
    ties each copy with its original exactly and ranks the original first (import order)."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(sessions, dims)).astype(np.float32)
    days = [f"2023-01-0{d}T00:00:00Z" for d in rng.integers(1, 4, sessions)]
    qid = f"dup{seed}"
    return Persona(
        question_id=qid,
        question="what did I say in that session?",
        row_ids=[f"{qid}::s{i}" for i in range(2 * sessions)],
        session_ids=[f"s{i % sessions}" for i in range(2 * sessions)],
        created_at=days * 2,
        texts=[f"user: session {i}" for i in range(sessions)] * 2,
        vectors=np.vstack([vectors, vectors]),
        query_vector=vectors[0] + rng.normal(scale=0.5, size=dims).astype(np.float32),
        query_tokens=6,
    )


def write_shard(folder: Path, personas: list[Persona], limit: int = 10) -> ShardSearch:
    """``personas`` as the filter and embed stages write a view (rows, texts, one embeddings
    file), read back by a search job as its one shard."""
    folder.mkdir(parents=True, exist_ok=True)
    texts, vectors, rows = {}, {}, []
    for p in personas:
        ids = [f"{p.question_id}-t{i}" for i in range(len(p.row_ids))]
        texts.update(zip(ids, p.texts))
        vectors.update(zip(ids, p.vectors))
        texts[f"{p.question_id}-q"], vectors[f"{p.question_id}-q"] = p.question, p.query_vector
        rows.append(
            {
                "question_id": p.question_id,
                "question": p.question,
                "question_text_id": f"{p.question_id}-q",
                "row_keys": [rid.split("::", 1)[1] for rid in p.row_ids],
                "row_sessions": p.session_ids,
                "row_created_at": p.created_at,
                "row_docs": p.docs or p.session_ids,
                "row_text_ids": ids,
            }
        )
    dims = len(next(iter(vectors.values())))
    pq.write_table(pa.table({"text_id": list(texts), "text": list(texts.values())}), folder / "texts.parquet")
    tokens = {**{i: 5 for i in texts}, **{f"{p.question_id}-q": p.query_tokens or 5 for p in personas}}
    pq.write_table(
        pa.table(
            {
                "text_id": list(vectors),
                "embedding": pa.FixedSizeListArray.from_arrays(
                    pa.array(np.concatenate(list(vectors.values())).astype(np.float32)), dims
                ),
                "tokens": pa.array([tokens[i] for i in vectors], pa.int32()),
            }
        ),
        folder / "embeddings.parquet",
    )
    pq.write_table(pa.Table.from_pylist(rows), folder / "rows.parquet")
    return ShardSearch(
        folder / "rows.parquet",
        folder / "texts.parquet",
        (folder / "embeddings.parquet",),
        0,
        1,
        RankingSettings(limit, limit),
    )
