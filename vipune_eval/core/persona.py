"""Personas: one haystack each, what one throwaway vipune database holds, plus its question.

Shared by both search lanes: loading a shard's personas with their rows, texts and cached
vectors, and turning a ranking of rows into the documents of the run file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from vipune_eval.core.io import read_rows_with_ids
from vipune_eval.core.ranking_settings import RankingSettings
from vipune_eval.errors import EvalError

Ranking = list[tuple[str, float]]  # (row id, score), best first


def row_id(question_id: str, key: str) -> str:
    """vipune's global primary key of a row: neutral, and unique within a persona's database."""
    return f"{question_id}::{key}"


@dataclass
class Persona:
    """One haystack: what one throwaway vipune database holds, plus its question."""

    question_id: str
    question: str
    row_ids: list[str]
    session_ids: list[str]  # the session of each row
    created_at: list[str]  # RFC3339, all UTC with the same format: sortable as text
    texts: list[str]
    vectors: np.ndarray  # (rows, dim) float32
    query_vector: np.ndarray  # (dim,) float32
    docs: list[str] | None = None  # what each row stands for in the run file (default: its session)
    query_tokens: int | None = None  # the question's tokens as vipune counts them (the lib lane's refusal)
    # Set by whoever makes the persona, never copied (dataclasses.replace makes them anew): each
    # text as JSON, shared by a shard's personas; ``full_digests`` once known (computed, or kept
    # for a persona made without its rows: stages.search.kept_stores).
    texts_json: list[bytes] | None = field(default=None, init=False, repr=False, compare=False)
    known_digests: list[str] | None = field(default=None, init=False, repr=False, compare=False)
    _doc_of: dict[str, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # Row ids map back through this lookup, never by parsing them (ids may hold '::').
        self._doc_of = dict(zip(self.row_ids, self.docs or self.session_ids))

    def knows(self, rid: str) -> bool:
        return rid in self._doc_of

    def doc_of(self, rid: str) -> str:
        return self._doc_of[rid]

    def digests(self) -> list[str]:
        """What a search of this persona was made from, in two short digests: its data (the
        question, each row's id, text and time) and its vectors (the rows' and the question's:
        the model's). A run's metrics keep them per pair (``ShardSearch.searched``), so two builds
        compared pair by pair are known to have searched the same things."""
        return [digest[:16] for digest in self.full_digests()]

    def full_digests(self) -> list[str]:
        """``digests`` in full (sha256), computed once: a kept store's key is made of them too."""
        if self.known_digests is None:
            data, vectors = hashlib.sha256(), hashlib.sha256()
            if self.texts_json is None:
                data.update(json.dumps([self.question, self.row_ids, self.texts, self.created_at]).encode())
            else:  # the same bytes, each text encoded once per shard (most texts are in several haystacks)
                data.update(
                    b"["
                    + json.dumps(self.question).encode()
                    + b", "
                    + json.dumps(self.row_ids).encode()
                    + b", ["
                    + b", ".join(self.texts_json)
                    + b"], "
                    + json.dumps(self.created_at).encode()
                    + b"]"
                )
            vectors.update(np.ascontiguousarray(self.vectors, "<f4").data)
            vectors.update(np.ascontiguousarray(self.query_vector, "<f4").data)
            self.known_digests = [data.hexdigest(), vectors.hexdigest()]
        return self.known_digests

    def documents(self, ranking: Ranking, settings: RankingSettings) -> list[str]:
        """The run's documents: rows' documents by first occurrence (the top k sessions are the
        first k distinct sessions of the row ranking), at most ``settings.depth``; without
        ``settings.collapse`` every row keeps its own document (a turn-level run)."""
        return first_documents((self._doc_of[rid] for rid, _ in ranking), settings.depth, settings.collapse)


def checked_ranking(persona: Persona, hits: Any, source: str) -> Ranking:
    """A search's answer as (row id, score), best first, refusing what no search of this persona
    can return: an id that is not one of its rows, an id twice, a malformed hit."""
    if not isinstance(hits, list):
        raise EvalError(f"persona {persona.question_id}: `{source}` answered {hits!r:.200}, not a list of hits")
    ranking: Ranking = []
    seen: set[str] = set()
    for rank, hit in enumerate(hits, start=1):
        rid, score = (hit[0], hit[1]) if isinstance(hit, (list, tuple)) and len(hit) == 2 else (None, None)
        if not isinstance(rid, str) or not persona.knows(rid):
            raise EvalError(
                f"persona {persona.question_id}: `{source}` returned {hit!r:.200} at rank {rank}, "
                "not a row of this persona (a contract violation)"
            )
        if rid in seen:
            first = next(i for i, h in enumerate(hits, start=1) if h[0] == rid)
            raise EvalError(
                f"persona {persona.question_id}: `{source}` returned id {rid!r} twice (ranks "
                f"{first} and {rank}; a contract violation)"
            )
        seen.add(rid)
        ranking.append((rid, float(score) if isinstance(score, (int, float)) else 0.0))
    return ranking


def first_documents(docs: Iterable[str], depth: int, collapse: bool = True) -> list[str]:
    """A ranking's documents by first occurrence (each row's document, best first), at most
    ``depth``; without ``collapse`` every row keeps its own document."""
    out: list[str] = []
    seen: set[str] = set()
    for doc in docs:
        if collapse and doc in seen:
            continue
        seen.add(doc)
        out.append(doc)
        if len(out) == depth:
            break
    return out


class Vectors:
    """The embedding shards in one matrix, looked up by text id (only ``keep``, when given, so
    a search shard holds the vectors of its own personas, not of the whole dataset), with each
    text's token count as vipune counts them."""

    def __init__(self, paths: Iterable[Path], keep: pa.Array | None = None) -> None:
        table = pa.concat_tables([read_rows_with_ids(p, ["text_id", "embedding", "tokens"], keep) for p in paths])
        tokens = table.column("tokens").combine_chunks().cast(pa.int32())
        self.tokens = np.frombuffer(tokens.buffers()[1], np.int32, len(tokens), 4 * tokens.offset)  # as above
        column = table.column("embedding").combine_chunks()
        dim = column.type.list_size
        values = column.values
        if values.type == pa.float32() and not values.null_count and len(values):
            # A view of the Arrow buffer: to_numpy() imports pandas (0.2 s of CPU per search job).
            flat = np.frombuffer(values.buffers()[1], np.float32, len(values), 4 * values.offset)
        else:
            flat = values.to_numpy(zero_copy_only=False)
        self.matrix: np.ndarray = flat.reshape(-1, dim)
        self.row = {tid: i for i, tid in enumerate(table.column("text_id").to_pylist())}

    def rows(self, text_ids: list[str]) -> np.ndarray:
        try:
            return np.array([self.row[t] for t in text_ids], dtype=np.int64)
        except KeyError as exc:
            raise EvalError(
                f"text {exc} has no embedding: the embedding shards do not match the "
                "filtered data (rerun the embed stage)"
            ) from exc

    def get(self, text_ids: list[str]) -> np.ndarray:
        vectors: np.ndarray = self.matrix[self.rows(text_ids)]
        return vectors


@dataclass(frozen=True)
class ShardSearch:
    """What every search job (reference, plugin, vipune) reads and how deep it ranks: one shard of
    a view's personas. Built by the CLI from the options every search command shares."""

    rows: Path  # the view's rows.parquet
    texts: Path  # its texts.parquet
    embeddings: tuple[Path, ...]  # its embedding shards
    shard: int
    shards: int
    ranking_settings: RankingSettings  # what its searches rank to (the view's: registry.views)

    def __post_init__(self) -> None:
        object.__setattr__(self, "embeddings", tuple(self.embeddings))

    @property
    def name(self) -> str:
        return f"shard {self.shard}/{self.shards}"

    def pair_count(self) -> int:
        return shard_pair_count(self.rows, self.shard, self.shards)

    def searched(self, flags: list[str], digests: dict[str, list[str]]) -> dict[str, Any]:
        """What a search of vipune's code over this shard was made from, for its status file: what
        it ranked to, vipune's search flags (its command line, or what vipune-lane was given) and
        each persona's digests (``Persona.digests``); the score stage carries it into the run's
        metrics, where the gate holds a baseline to it."""
        return {
            "settings": {"ranking_settings": asdict(self.ranking_settings), "flags": list(flags)},
            "personas": dict(sorted(digests.items())),
        }

    def personas(self) -> Iterator[Persona]:
        return personas_of_shard(self.rows, self.texts, list(self.embeddings), self.shard, self.shards)


def shard_pair_count(rows_path: Path, shard: int, shards: int) -> int:
    return len(range(shard, pq.ParquetFile(rows_path).metadata.num_rows, shards))


def shard_rows(rows_path: Path, shard: int, shards: int) -> pa.Table:
    """Every ``shards``-th pair of the view, from ``shard`` (possibly none), read in batches: the
    rows table of a turn-level view holds every pair's row lists and is large."""
    parts = []
    first = 0  # index of the batch's first pair in the table
    for batch in pq.ParquetFile(rows_path).iter_batches(batch_size=64):
        # One-row slices, not take(): an index array from pa.array() imports pandas (0.2 s of CPU).
        parts += [batch.slice(i, 1) for i in range((shard - first) % shards, batch.num_rows, shards)]
        first += batch.num_rows
    return pa.Table.from_batches(parts, schema=pq.read_schema(rows_path))


def personas_of_shard(
    rows_path: Path, texts_path: Path, embeddings: list[Path], shard: int, shards: int
) -> Iterator[Persona]:
    """The shard's personas with their rows' texts and vectors (none for an empty shard); the
    pairs stay Arrow data until their persona is made."""
    yield from personas_of_pairs(shard_rows(rows_path, shard, shards), texts_path, embeddings)


def pair_at(pairs: pa.Table, i: int) -> dict[str, Any]:
    """The ``i``-th pair of a rows table, as Python values."""
    pair: dict[str, Any] = pairs.slice(i, 1).to_pylist()[0]
    return pair


def personas_of_pairs(pairs: pa.Table, texts_path: Path, embeddings: list[Path]) -> Iterator[Persona]:
    """The personas of these pairs (rows of a view's rows.parquet) with their rows' texts and
    vectors, in order."""
    if not pairs.num_rows:
        return
    # An Arrow array, never a Python list: pa.array() would import pandas.
    needed = pc.unique(
        pa.chunked_array(
            [*pc.list_flatten(pairs.column("row_text_ids")).chunks, *pairs.column("question_text_id").chunks]
        ).combine_chunks()
    )
    table = read_rows_with_ids(texts_path, ["text_id", "text"], needed)
    text = dict(zip(table.column("text_id").to_pylist(), table.column("text").to_pylist()))
    del table
    encoded: dict[str, bytes] = {}  # text id → the text as JSON, made once (Persona.full_digests)

    def as_json(text_id: str) -> bytes:
        if text_id not in encoded:
            encoded[text_id] = json.dumps(text[text_id]).encode()
        return encoded[text_id]

    vectors = Vectors(embeddings, keep=needed)
    for i in range(pairs.num_rows):
        pair = pair_at(pairs, i)
        qid = pair["question_id"]
        persona = Persona(
            question_id=qid,
            question=pair["question"],
            row_ids=[row_id(qid, key) for key in pair["row_keys"]],
            session_ids=pair["row_sessions"],
            created_at=pair["row_created_at"],
            texts=[text[t] for t in pair["row_text_ids"]],
            vectors=vectors.get(pair["row_text_ids"]),
            query_vector=vectors.get([pair["question_text_id"]])[0],
            docs=pair["row_docs"],
            query_tokens=int(vectors.tokens[vectors.rows([pair["question_text_id"]])[0]]),
        )
        persona.texts_json = [as_json(t) for t in pair["row_text_ids"]]
        yield persona
