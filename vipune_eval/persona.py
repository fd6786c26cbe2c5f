"""Personas: one haystack each, what one throwaway vipune database holds, plus its question.

Shared by both search lanes: loading a shard's personas with their texts and cached vectors,
and writing the TREC run file of a lane.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .io import EvalError, atomic_path

Ranking = list[tuple[str, float]]  # (row id, score), best first


@dataclass
class Persona:
    """One haystack: what one throwaway vipune database holds, plus its question."""

    question_id: str
    question: str
    row_ids: list[str]          # "<question_id>::<session_id>", vipune's global primary keys
    session_ids: list[str]
    created_at: list[str]       # RFC3339, all UTC with the same format: sortable as text
    texts: list[str]
    vectors: np.ndarray         # (rows, dim) float32
    query_vector: np.ndarray    # (dim,) float32

    def session_of(self, row_id: str) -> str:
        return row_id.split("::", 1)[1]


def row_id(question_id: str, session_id: str) -> str:
    return f"{question_id}::{session_id}"


class Vectors:
    """The embedding shards in one matrix, looked up by text id (only ``keep``, when given, so
    a search shard holds the vectors of its own personas, not of the whole dataset)."""

    def __init__(self, paths: Iterable[Path], keep: set[str] | None = None) -> None:
        row_filter = None if keep is None else pc.field("text_id").isin(pa.array(sorted(keep)))
        tables = [pq.read_table(p, columns=["text_id", "embedding"], filters=row_filter) for p in paths]
        table = pa.concat_tables(tables)
        column = table.column("embedding").combine_chunks()
        dim = column.type.list_size
        self.matrix = column.values.to_numpy(zero_copy_only=False).reshape(-1, dim)
        self.row = {tid: i for i, tid in enumerate(table.column("text_id").to_pylist())}

    def rows(self, text_ids: list[str]) -> np.ndarray:
        try:
            return np.array([self.row[t] for t in text_ids], dtype=np.int64)
        except KeyError as exc:
            raise EvalError(f"text {exc} has no embedding: the embedding shards do not match the "
                            "filtered data (rerun the embed stage)") from exc

    def get(self, text_ids: list[str]) -> np.ndarray:
        return self.matrix[self.rows(text_ids)]


def personas_of_shard(pairs_path: Path, texts_path: Path, embeddings: list[Path], shard: int,
                      shards: int) -> Iterator[Persona]:
    """The shard's personas (every ``shards``-th pair, from ``shard``) with texts and vectors."""
    table = pq.read_table(pairs_path)
    pairs = table.take(pa.array(range(shard, table.num_rows, shards), pa.int64())).to_pylist()
    needed = {t for p in pairs for t in [p["question_text_id"], *p["session_text_ids"]]}
    table = pq.read_table(texts_path, filters=pc.field("text_id").isin(pa.array(sorted(needed))))
    text = dict(zip(table.column("text_id").to_pylist(), table.column("text").to_pylist()))
    vectors = Vectors(embeddings, keep=needed)
    for pair in pairs:
        qid = pair["question_id"]
        yield Persona(
            question_id=qid, question=pair["question"],
            row_ids=[row_id(qid, sid) for sid in pair["session_ids"]],
            session_ids=pair["session_ids"], created_at=pair["session_created_at"],
            texts=[text[t] for t in pair["session_text_ids"]],
            vectors=vectors.get(pair["session_text_ids"]),
            query_vector=vectors.get([pair["question_text_id"]])[0])


def write_run(path: Path, rankings: list[tuple[Persona, Ranking]], tag: str) -> None:
    """TREC run lines ``qid Q0 docid rank score tag``; scores strictly decreasing, from the rank."""
    lines = []
    for persona, ranking in rankings:
        for rank, (rid, _) in enumerate(ranking, start=1):
            lines.append(f"{persona.question_id} Q0 {persona.session_of(rid)} {rank} "
                         f"{len(ranking) - rank + 1} {tag}\n")
    with atomic_path(path) as tmp:
        tmp.write_text("".join(lines), encoding="utf-8")
