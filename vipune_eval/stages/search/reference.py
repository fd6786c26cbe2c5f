"""Reference retrievers on the cached vectors, no binary: the model-free lane.

They mirror vipune's search (docs/vipune-contract.md, "How search ranks") where it matters —
the semantic arm's f64 cosine over rows read newest first with a stable sort, per-persona BM25
statistics, the quoted-AND FTS5 query, candidate pools of clamp(10 × limit, 50, 10000), RRF with
k = 25 and fused ties to the smaller id — so that `hybrid` is a differential check of the binary
and the others give context for its number.

A persona's arms (dense, bm25 AND, bm25 OR), each ranking every row it finds, are computed once
(``persona_arms``) and written to an arms file; every family setting of vipune_eval.retrievers
ranks from them, so a grid of hybrid variants costs fusions, not searches.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from vipune_eval.registry import retrievers as registry
from vipune_eval.core import trec
from vipune_eval.errors import EvalError
from vipune_eval.core.io import Progress, atomic_path
from vipune_eval.core.persona import Persona, Ranking, ShardSearch, first_documents

RRF_K = registry.FAMILIES["hybrid"].params["k"].default
candidate_pool = registry.candidate_pool


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


@dataclass
class Arms:
    """A persona's shared rankings: row indices best first, with their scores (every row for
    dense, every matching row for bm25)."""

    question_id: str
    row_ids: list[str]
    docs: list[str]  # what each row stands for in the run file
    ranked: dict[str, tuple[np.ndarray, np.ndarray]]  # arm → (row indices int32, scores float64)
    _tie: np.ndarray | None = None

    ARMS = ("dense", "bm25-and", "bm25-or")

    @property
    def tie(self) -> np.ndarray:
        """Each row's position among the row ids sorted: fused ties go to the smaller id."""
        if self._tie is None:
            tie = np.empty(len(self.row_ids), np.int64)
            tie[sorted(range(len(self.row_ids)), key=self.row_ids.__getitem__)] = np.arange(len(self.row_ids))
            self._tie = tie
        return self._tie

    def documents(self, indices: np.ndarray, depth: int, collapse: bool = True) -> list[str]:
        """As Persona.documents: rows' documents by first occurrence, at most ``depth``."""
        return first_documents((self.docs[i] for i in indices.tolist()), depth, collapse)


def _indexed(persona: Persona, ranking: Ranking) -> tuple[np.ndarray, np.ndarray]:
    position = {rid: i for i, rid in enumerate(persona.row_ids)}
    return (np.array([position[r] for r, _ in ranking], np.int32),
            np.array([s for _, s in ranking], np.float64))


def persona_arms(persona: Persona) -> Arms:
    """The three arms of ``persona``, each at full depth (every row it ranks)."""
    n = len(persona.row_ids)
    index = Bm25Index(persona)
    try:
        ranked = {"dense": _indexed(persona, dense(persona, n)),
                  "bm25-and": _indexed(persona, index.search(fts_and_query(persona.question), n)),
                  "bm25-or": _indexed(persona, index.search(fts_or_query(persona.question), n))}
    finally:
        index.close()
    return Arms(persona.question_id, list(persona.row_ids),
                [persona.doc_of(r) for r in persona.row_ids], ranked)


def search_persona(persona: Persona, retrievers: list[Any], limit: int,
                   rank_all: bool = False) -> dict[str, Ranking]:
    """Rankings of ``persona``'s question by each reference retriever (preset names or
    vipune_eval.retrievers specs), all from one computation of its arms. The fusions follow
    vipune at ``limit``; with ``rank_all`` the single arms rank every row (turn and chunk rows,
    whose rankings collapse to sessions), else their first ``limit``."""
    specs = [r if isinstance(r, registry.Spec) else registry.spec(r) for r in retrievers]
    arms = persona_arms(persona) if any(s.from_arms for s in specs) else None
    out = {}
    for s in specs:
        source = arms if s.from_arms else persona
        indices, scores = registry.rank(source, s, limit, rank_all)
        out[s.name] = [(persona.row_ids[i], float(v)) for i, v in zip(indices.tolist(), scores.tolist())]
    return out


# ---------------------------------------------------------------- the arms file

_ARMS_SCHEMA = pa.schema([("question_id", pa.string()), ("row_ids", pa.list_(pa.string())),
                          ("docs", pa.list_(pa.string()))]
                         + [(f"{arm}{part}", pa.list_(kind)) for arm in Arms.ARMS
                            for part, kind in (("", pa.int32()), ("_score", pa.float64()))])


def write_arms(path: Path, arms: list[Arms]) -> None:
    columns: dict[str, list] = {name: [] for name in _ARMS_SCHEMA.names}
    for a in arms:
        columns["question_id"].append(a.question_id)
        columns["row_ids"].append(a.row_ids)
        columns["docs"].append(a.docs)
        for arm in Arms.ARMS:
            columns[arm].append(a.ranked[arm][0])
            columns[f"{arm}_score"].append(a.ranked[arm][1])
    with atomic_path(path) as tmp:
        pq.write_table(pa.table(columns, schema=_ARMS_SCHEMA), tmp)


def read_arms(path: Path) -> Iterator[Arms]:
    try:
        table = pq.read_table(path, schema=_ARMS_SCHEMA)
    except (OSError, pa.ArrowInvalid) as exc:
        raise EvalError(f"cannot read the arms file {path}: {exc} (rerun search_reference)") from exc
    lists = {}
    for name in _ARMS_SCHEMA.names[1:]:
        column = table.column(name).combine_chunks()
        values = column.values
        lists[name] = (column.offsets.to_numpy(),
                       values.to_pylist() if pa.types.is_string(values.type) else values.to_numpy())
    for i, qid in enumerate(table.column("question_id").to_pylist()):
        def part(name: str) -> Any:
            offsets, values = lists[name]
            return values[offsets[i]:offsets[i + 1]]

        yield Arms(qid, part("row_ids"), part("docs"),
                   {arm: (part(arm), part(f"{arm}_score")) for arm in Arms.ARMS})


def run_reference(shard: ShardSearch, arms_out: Path | None = None,
                  retrievers: list[str] | None = None, outputs: list[Path] | None = None,
                  rank_all: bool = False) -> None:
    """The arms of one shard's personas (``arms_out``: what the workflow's fusions read) and/or
    the runs of ``retrievers`` (preset names or canonical JSON specs), one file per retriever;
    a run lists at most ``depth`` documents per pair."""
    retrievers, outputs = retrievers or [], outputs or []
    if len(retrievers) != len(outputs) or not (arms_out or retrievers):
        raise EvalError(f"search-reference: retrievers {retrievers} with outputs {outputs} "
                        f"(and arms {arms_out})")
    if retrievers:
        specs = [registry.from_argument(r) for r in retrievers]
        if any(s.lane != "reference" or s.plugin for s in specs):
            raise EvalError(f"search-reference runs families only, got {retrievers}")
    else:
        specs = []
    runs: dict[str, list[tuple[str, list[str]]]] = {s.name: [] for s in specs}
    kept: list[Arms] = []
    need_arms = bool(arms_out) or any(s.from_arms for s in specs)
    limit, depth, collapse = shard.limit, shard.depth, shard.collapse
    progress = Progress(f"reference {shard.name}: personas", total=shard.pair_count())
    for persona in shard.personas():
        arms = persona_arms(persona) if need_arms else None
        if arms_out:
            kept.append(arms)
        for s in specs:
            if s.from_arms:
                ranked = arms.documents(registry.rank(arms, s, limit, rank_all)[0], depth, collapse)
            else:  # a family that ranks from the persona itself (bm25-lme)
                indices = registry.rank(persona, s, limit, rank_all)[0]
                ranked = persona.documents([(persona.row_ids[i], 0.0) for i in indices.tolist()], depth, collapse)
            runs[s.name].append((persona.question_id, ranked))
        progress.advance()
    if arms_out:
        write_arms(arms_out, kept)
    for (name, ranked), out in zip(runs.items(), outputs):
        trec.write_run(out, ranked, name)


def run_fuse(arms: list[Path], retriever: str, limit: int, depth: int, outputs: list[Path],
             rank_all: bool = False, collapse: bool = True) -> None:
    """One family setting's run files, one per arms file (a search shard), from the shared arms."""
    if len(arms) != len(outputs):
        raise EvalError(f"fuse: {len(arms)} arms files for {len(outputs)} outputs")
    s = registry.from_argument(retriever)
    if not s.from_arms:
        raise EvalError(f"fuse: {retriever} is not a family setting fused from the arms")
    for path, out in zip(arms, outputs):
        trec.write_run(out, [(a.question_id, a.documents(registry.rank(a, s, limit, rank_all)[0], depth, collapse))
                             for a in read_arms(path)], s.name)
