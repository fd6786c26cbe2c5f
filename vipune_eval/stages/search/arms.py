"""search-arms: a shard's shared arms, the reference retrievers' one search per persona.

The reference retrievers run on the cached vectors without any of vipune's code. They
mirror vipune's search (docs/vipune-contract.md, "How search ranks") where it matters — the
semantic arm's f64 cosine over rows read newest first with a stable sort, per-persona BM25
statistics, the quoted-AND FTS5 query, candidate pools of clamp(10 × limit, 50, 10000), RRF with
k = 25 and fused ties to the smaller id — so that `hybrid` is a differential check of the binary
and the others give context for its number.

A persona's arms (registry.shared_arms.ARMS: dense and one bm25 arm per query form), each ranking
every row it finds, are computed once (``persona_arms``) and written to an arms file; every ARMS
family setting ranks from them (stages.search.fuse_reference), so a grid of hybrid variants costs fusions,
not searches.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from vipune_eval.core.io import Progress, atomic_path, read_parquet
from vipune_eval.core.persona import Persona, Ranking, ShardSearch, first_documents
from vipune_eval.core.ranking_settings import RankingSettings
from vipune_eval.errors import EvalError
from vipune_eval.registry.shared_arms import ARMS, BM25_QUERIES, DENSE_ARM, bm25_arm


def dense(persona: Persona, n: int) -> Ranking:
    """vipune's semantic arm: cosine in f64 of the f32 vectors (0 against a zero vector), rows
    taken newest first, then a stable sort by score: exact ties keep the newer row first and,
    within one created_at, import order.

    Each row's dot product is its own sum (numpy's pairwise sum over the row: its order fixed by
    the row's length alone), so byte-identical rows (a session repeated with its date) score the
    same bits and tie exactly, as in vipune, which scores row by row. A matrix product does not:
    BLAS handles the rows past its block's last multiple apart, with other last bits."""
    vectors = persona.vectors.astype(np.float64)
    query = persona.query_vector.astype(np.float64)
    norms = np.sqrt((vectors * vectors).sum(axis=1)) * np.sqrt(query @ query)
    sims = np.divide((vectors * query).sum(axis=1), norms, out=np.zeros(len(vectors)), where=norms != 0)
    newest_first = np.array(sorted(range(len(sims)), key=persona.created_at.__getitem__, reverse=True), np.intp)
    order = newest_first[np.argsort(-sims[newest_first], kind="stable")]  # both sorts are stable
    return [(persona.row_ids[i], float(sims[i])) for i in order[:n].tolist()]


def fts_and_query(question: str) -> str:
    """vipune's escape_fts_query: every whitespace token quoted, joined by spaces (implicit AND)."""
    return " ".join(_quote(word) for word in question.split())


def fts_or_query(question: str) -> str:
    return " OR ".join(_quote(word) for word in question.split())


FTS_QUERY = {"and": fts_and_query, "or": fts_or_query}  # one per registry.shared_arms.BM25_QUERIES


def _quote(word: str) -> str:
    return '"' + word.replace("\\", "\\\\").replace('"', '""') + '"'


class Bm25Index:
    """One FTS5 index per persona (vipune keeps one database, so one set of statistics, per persona)."""

    def __init__(self, persona: Persona) -> None:
        self.persona = persona
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE memories_fts USING fts5(content, tokenize='porter unicode61')")
        self.db.executemany("INSERT INTO memories_fts(rowid, content) VALUES (?, ?)", enumerate(persona.texts, start=1))

    def search(self, match: str, n: int) -> Ranking:
        if not match:
            return []
        rows = self.db.execute(
            "SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? "
            "ORDER BY bm25(memories_fts) LIMIT ?",
            (match, n),
        ).fetchall()
        return [(self.persona.row_ids[rowid - 1], -score) for rowid, score in rows]

    def close(self) -> None:
        self.db.close()


@dataclass
class Arms:
    """A persona's shared rankings: row indices best first, with their scores (every row for
    dense, every matching row for bm25)."""

    question_id: str
    row_ids: list[str]
    docs: list[str]  # what each row stands for in the run file
    ranked: dict[str, tuple[np.ndarray, np.ndarray]]  # arm → (row indices int32, scores float64)
    _tie: np.ndarray | None = None

    @property
    def tie(self) -> np.ndarray:
        """Each row's position among the row ids sorted: fused ties go to the smaller id."""
        if self._tie is None:
            tie = np.empty(len(self.row_ids), np.int64)
            tie[sorted(range(len(self.row_ids)), key=self.row_ids.__getitem__)] = np.arange(len(self.row_ids))
            self._tie = tie
        return self._tie

    def documents(self, indices: np.ndarray, settings: RankingSettings) -> list[str]:
        """As Persona.documents: rows' documents by first occurrence, at most ``settings.depth``."""
        return first_documents((self.docs[i] for i in indices.tolist()), settings.depth, settings.collapse)


def _indexed(persona: Persona, ranking: Ranking) -> tuple[np.ndarray, np.ndarray]:
    position = {rid: i for i, rid in enumerate(persona.row_ids)}
    return (np.array([position[r] for r, _ in ranking], np.int32), np.array([s for _, s in ranking], np.float64))


def persona_arms(persona: Persona) -> Arms:
    """The arms of ``persona``, each at full depth (every row it ranks)."""
    n = len(persona.row_ids)
    index = Bm25Index(persona)
    try:
        ranked = {DENSE_ARM: _indexed(persona, dense(persona, n))}
        for query in BM25_QUERIES:
            ranked[bm25_arm(query)] = _indexed(persona, index.search(FTS_QUERY[query](persona.question), n))
    finally:
        index.close()
    return Arms(persona.question_id, list(persona.row_ids), [persona.doc_of(r) for r in persona.row_ids], ranked)


# ---------------------------------------------------------------- the arms file

_ARMS_SCHEMA = pa.schema(
    [("question_id", pa.string()), ("row_ids", pa.list_(pa.string())), ("docs", pa.list_(pa.string()))]
    + [(f"{arm}{part}", pa.list_(kind)) for arm in ARMS for part, kind in (("", pa.int32()), ("_score", pa.float64()))]
)


def write_arms(path: Path, arms: list[Arms]) -> None:
    columns: dict[str, list] = {name: [] for name in _ARMS_SCHEMA.names}
    for a in arms:
        columns["question_id"].append(a.question_id)
        columns["row_ids"].append(a.row_ids)
        columns["docs"].append(a.docs)
        for arm in ARMS:
            columns[arm].append(a.ranked[arm][0])
            columns[f"{arm}_score"].append(a.ranked[arm][1])
    with atomic_path(path) as tmp:
        pq.write_table(pa.table(columns, schema=_ARMS_SCHEMA), tmp)


def read_arms(path: Path) -> Iterator[Arms]:
    try:
        table = read_parquet(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise EvalError(f"cannot read the arms file {path}: {exc} (rerun search_arms)") from exc
    if not table.schema.equals(_ARMS_SCHEMA):
        raise EvalError(
            f"{path} is not an arms file of this version: its columns are {table.schema.names} (rerun search_arms)"
        )
    lists = {}
    for name in _ARMS_SCHEMA.names[1:]:
        column = table.column(name).combine_chunks()
        values = column.values
        lists[name] = (
            column.offsets.to_numpy(),
            values.to_pylist() if pa.types.is_string(values.type) else values.to_numpy(),
        )
    for i, qid in enumerate(table.column("question_id").to_pylist()):

        def part(name: str, i: int = i) -> Any:  # this question's slice, bound as it is made
            offsets, values = lists[name]
            return values[offsets[i] : offsets[i + 1]]

        yield Arms(qid, part("row_ids"), part("docs"), {arm: (part(arm), part(f"{arm}_score")) for arm in ARMS})


def run_arms(shard: ShardSearch, arms_out: Path) -> None:
    """The arms of one shard's personas: what every ARMS family's fusion reads."""
    progress = Progress(f"arms {shard.name}: personas", total=shard.pair_count())
    kept = []
    for persona in shard.personas():
        kept.append(persona_arms(persona))
        progress.advance()
    write_arms(arms_out, kept)
