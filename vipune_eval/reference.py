"""Reference retrievers on the cached vectors, no binary: the model-free lane.

They mirror vipune's search (docs/vipune-contract.md, "How search ranks") where it matters —
the semantic arm's f64 cosine over rows read newest first with a stable sort, per-persona BM25
statistics, the quoted-AND FTS5 query, candidate pools of clamp(10 × limit, 50, 10000), RRF with
k = 25 and fused ties to the smaller id — so that `hybrid` is a differential check of the binary
and the others give context for its number.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Callable

import numpy as np

from . import retrievers as registry
from . import trec
from .io import Progress
from .persona import Persona, Ranking, personas_of_shard, shard_pair_count
from .vipune import MAX_SEARCH_LIMIT

RRF_K = 25


def candidate_pool(limit: int) -> int:
    return min(max(limit * 10, 50), MAX_SEARCH_LIMIT)


def dense(persona: Persona, n: int) -> Ranking:
    """vipune's semantic arm: cosine in f64 of the f32 vectors (0 against a zero vector), rows
    taken newest first, then a stable sort by score: exact ties keep the newer row first and,
    within one created_at, import order."""
    vectors = persona.vectors.astype(np.float64)
    query = persona.query_vector.astype(np.float64)
    norms = np.sqrt((vectors * vectors).sum(axis=1)) * np.sqrt(query @ query)
    sims = np.divide(vectors @ query, norms, out=np.zeros(len(vectors)), where=norms != 0)
    newest_first = sorted(range(len(sims)), key=lambda i: persona.created_at[i], reverse=True)
    order = sorted(newest_first, key=lambda i: -sims[i])  # both sorts are stable
    return [(persona.row_ids[i], float(sims[i])) for i in order[:n]]


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


def search_persona(persona: Persona, retrievers: list[str], limit: int,
                   rank_all: bool = False) -> dict[str, Ranking]:
    """Rankings of ``persona``'s question by each named reference retriever. The fusions follow
    vipune at ``limit``; with ``rank_all`` the single arms rank every row (turn and chunk rows,
    whose rankings collapse to sessions), else their first ``limit``."""
    pool = candidate_pool(limit)
    rows = len(persona.row_ids)
    index = Bm25Index(persona)
    try:
        arms: dict[str, Callable[[int], Ranking]] = {
            "dense": lambda n: dense(persona, n),
            "bm25": lambda n: index.search(fts_and_query(persona.question), n),
            "bm25-or": lambda n: index.search(fts_or_query(persona.question), n),
        }
        depth = max(pool, rows) if rank_all else pool
        cache: dict[str, Ranking] = {}

        def arm(name: str) -> Ranking:
            if name not in cache:
                cache[name] = arms[name](depth)
            return cache[name]

        out: dict[str, Ranking] = {}
        for name in retrievers:
            if name == "hybrid":
                out[name] = rrf([arm("dense")[:pool], arm("bm25")[:pool]], limit)
            elif name == "hybrid-or":
                out[name] = rrf([arm("dense")[:pool], arm("bm25-or")[:pool]], limit)
            else:
                out[name] = arm(name) if rank_all else arm(name)[:limit]
        return out
    finally:
        index.close()


def run_reference(rows: Path, texts: Path, embeddings: list[Path], shard: int, shards: int,
                  retrievers: list[str], limit: int, depth: int, outputs: list[Path],
                  rank_all: bool = False, collapse: bool = True) -> None:
    """Reference rankings of one shard's personas, one run file per retriever; a run lists at
    most ``depth`` documents per pair."""
    unknown = [r for r in retrievers if r not in registry.REFERENCE]
    if unknown or len(retrievers) != len(outputs):
        raise ValueError(f"reference retrievers {retrievers} with outputs {outputs}")
    # Only each pair's run documents are kept, not the persona (its rows, texts and vectors).
    runs: dict[str, list[tuple[str, list[str]]]] = {name: [] for name in retrievers}
    progress = Progress(f"reference shard {shard}/{shards}: personas",
                        total=shard_pair_count(rows, shard, shards))
    for persona in personas_of_shard(rows, texts, embeddings, shard, shards):
        for name, ranking in search_persona(persona, retrievers, limit, rank_all).items():
            runs[name].append((persona.question_id, persona.documents(ranking, depth, collapse)))
        progress.advance()
    for name, out in zip(retrievers, outputs):
        trec.write_run(out, runs[name], name)
