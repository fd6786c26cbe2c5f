"""Reference retrievers on the cached vectors, no binary: the model-free lane.

They mirror vipune's hybrid search (src/memory/search.rs, src/sqlite/fts.rs, src/rrf.rs) where it
matters — per-persona BM25 statistics, the quoted-AND FTS5 query, candidate pools of
clamp(10 × limit, 50, 10000), RRF with k = 25 and ties to the smaller id — so that `hybrid`
is a differential check of the binary and the others give context for its number.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Callable

import numpy as np

from .io import Progress
from .persona import Persona, Ranking, personas_of_shard, write_run

RRF_K = 25
MAX_SEARCH_LIMIT = 10_000


def candidate_pool(limit: int) -> int:
    return min(max(limit * 10, 50), MAX_SEARCH_LIMIT)


def dense(persona: Persona, n: int) -> Ranking:
    """Brute-force cosine; exact ties go to the newer created_at, then the smaller id."""
    norms = np.linalg.norm(persona.vectors, axis=1) * np.linalg.norm(persona.query_vector)
    sims = (persona.vectors @ persona.query_vector) / np.where(norms == 0, 1, norms)
    order = sorted(range(len(sims)), key=lambda i: (-float(sims[i]), _neg(persona.created_at[i]),
                                                    persona.row_ids[i]))
    return [(persona.row_ids[i], float(sims[i])) for i in order[:n]]


def _neg(stamp: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in stamp)


def fts_and_query(question: str) -> str:
    """vipune's escape_fts_query: every whitespace token quoted, joined by spaces (implicit AND)."""
    return " ".join(_quote(word) for word in question.split())


def fts_or_query(question: str) -> str:
    return " OR ".join(_quote(word) for word in question.split())


def _quote(word: str) -> str:
    return '"' + word.replace("\\", "\\\\").replace('"', '""') + '"'


class Bm25Index:
    """One FTS5 index per persona (vipune keeps one database, so one set of statistics, per persona)."""

    def __init__(self, persona: Persona) -> None:
        self.persona = persona
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE memories_fts USING fts5(content, tokenize='porter unicode61')")
        self.db.executemany("INSERT INTO memories_fts(rowid, content) VALUES (?, ?)",
                            enumerate(persona.texts, start=1))

    def search(self, match: str, n: int) -> Ranking:
        if not match:
            return []
        rows = self.db.execute(
            "SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? "
            "ORDER BY bm25(memories_fts) LIMIT ?", (match, n)).fetchall()
        return [(self.persona.row_ids[rowid - 1], -score) for rowid, score in rows]

    def close(self) -> None:
        self.db.close()


def rrf(rankings: list[Ranking], limit: int) -> Ranking:
    """Reciprocal rank fusion, k = 25, ranks from 1; ties to the smaller id; truncated to limit."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, (rid, _) in enumerate(ranking, start=1):
            scores[rid] = scores.get(rid, 0.0) + 1.0 / (RRF_K + rank)
    fused = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return fused[:limit]


def search_persona(persona: Persona, retrievers: list[str], limit: int) -> dict[str, Ranking]:
    """Rankings of ``persona``'s question by each named reference retriever."""
    pool = candidate_pool(limit)
    index = Bm25Index(persona)
    try:
        arms: dict[str, Callable[[], Ranking]] = {
            "dense": lambda: dense(persona, pool),
            "bm25": lambda: index.search(fts_and_query(persona.question), pool),
            "bm25-or": lambda: index.search(fts_or_query(persona.question), pool),
        }
        cache: dict[str, Ranking] = {}

        def arm(name: str) -> Ranking:
            if name not in cache:
                cache[name] = arms[name]()
            return cache[name]

        out: dict[str, Ranking] = {}
        for name in retrievers:
            if name == "hybrid":
                out[name] = rrf([arm("dense"), arm("bm25")], limit)
            elif name == "hybrid-or":
                out[name] = rrf([arm("dense"), arm("bm25-or")], limit)
            else:
                out[name] = arm(name)[:limit]
        return out
    finally:
        index.close()


REFERENCE_RETRIEVERS = ("dense", "bm25", "bm25-or", "hybrid", "hybrid-or")


def run_reference(pairs: Path, texts: Path, embeddings: list[Path], shard: int, shards: int,
                  retrievers: list[str], limit: int, outputs: list[Path]) -> None:
    personas = list(personas_of_shard(pairs, texts, embeddings, shard, shards))
    progress = Progress(f"reference shard {shard}/{shards}: personas", total=len(personas))
    results: dict[str, list[tuple[Persona, Ranking]]] = {name: [] for name in retrievers}
    for persona in personas:
        for name, ranking in search_persona(persona, retrievers, limit).items():
            results[name].append((persona, ranking))
        progress.advance()
    for name, out in zip(retrievers, outputs):
        write_run(out, results[name], name)
