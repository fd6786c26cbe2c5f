"""filter-rows: each pair's memory rows at the view's granularity and the unique texts they and the
questions hold (what embed and search read). Written in batches: only the set of seen text ids
stays in memory. The pairs' labels (gold, split) are stages.filter.pairs', so relabelling reruns
no embed or search.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from vipune_eval.core.io import atomic_path, log, text_id
from vipune_eval.errors import EvalError
from vipune_eval.registry import granularities
from vipune_eval.stages.filter.chunking import Chunker
from vipune_eval.stages.filter.official import official_rows
from vipune_eval.stages.filter.reader import Instance, Row, created_at_of, usable_instances

ROWS_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("question", pa.string()),
        ("question_text_id", pa.string()),
        ("row_keys", pa.list_(pa.string())),  # unique within the pair: the vipune row id's tail
        ("row_sessions", pa.list_(pa.string())),  # the session each row belongs to
        ("row_docs", pa.list_(pa.string())),  # the document a row stands for in the run file
        ("row_text_ids", pa.list_(pa.string())),
        ("row_created_at", pa.list_(pa.string())),
    ]
)


TEXTS_SCHEMA = pa.schema([("text_id", pa.string()), ("text", pa.string())])


def seed_rows(instance: Instance, granularity: str, chunker: Callable | None) -> list[Row]:
    """The rows the granularity makes of each session (registry.granularities)."""
    make = granularities.get(granularity).seed_rows
    return [
        Row(key, sid, sid, text) for sid, session, _ in instance.sessions for key, text in make(sid, session, chunker)
    ]


def rows_of(instance: Instance, protocol: str, granularity: str, chunker: Callable | None) -> list[Row] | None:
    """The view's rows of an instance (the official view keeps every non-abstention pair:
    print_retrieval_metrics.py averages them all; its skip rule is a column of the pairs)."""
    if protocol == "official":
        return official_rows(instance, granularity)
    return seed_rows(instance, granularity, chunker)


class _TextWriter:
    """Unique texts to Parquet in batches (the same filler text appears in many haystacks)."""

    def __init__(self, path: Path, batch: int = 2000) -> None:
        self.writer = pq.ParquetWriter(path, TEXTS_SCHEMA)
        self.seen: set[str] = set()
        self.pending: list[dict[str, str]] = []
        self.batch = batch

    def add(self, text: str) -> str:
        tid = text_id(text)
        if tid not in self.seen:
            self.seen.add(tid)
            self.pending.append({"text_id": tid, "text": text})
            if len(self.pending) >= self.batch:
                self.flush()
        return tid

    def flush(self) -> None:
        if self.pending:
            self.writer.write_table(pa.Table.from_pylist(self.pending, schema=TEXTS_SCHEMA))
            self.pending.clear()

    def close(self) -> None:
        self.flush()
        self.writer.close()


def run_rows(
    dataset: Path,
    protocol: str,
    granularity: str,
    rows_out: Path,
    texts_out: Path,
    tokenizer: Path | None = None,
    batch_pairs: int = 64,
) -> dict[str, int]:
    """Each pair's memory rows (the view's granularity) and the unique texts they and the
    questions hold. Returns counts (pairs, row slots, unique texts)."""
    kind = granularities.get(granularity)
    granularity = kind.name
    chunker = None
    if kind.needs_tokenizer:
        if tokenizer is None:
            raise EvalError(f"{granularity} rows need the model's tokenizer.json (--tokenizer)")
        chunker = Chunker(tokenizer)
    counts: Counter = Counter()
    with atomic_path(texts_out) as tmp_texts, atomic_path(rows_out) as tmp_rows:
        texts = _TextWriter(tmp_texts)
        writer = pq.ParquetWriter(tmp_rows, ROWS_SCHEMA)
        batch: list[dict[str, Any]] = []
        for instance in usable_instances(dataset, counts, None):
            rows = rows_of(instance, protocol, granularity, chunker)
            if rows is None:
                continue
            stamps = created_at_of(instance)
            pair = instance.pair
            batch.append(
                {
                    "question_id": pair["question_id"],
                    "question": pair["question"],
                    "question_text_id": texts.add(pair["question"]),
                    "row_keys": [r.key for r in rows],
                    "row_sessions": [r.session for r in rows],
                    "row_docs": [r.doc for r in rows],
                    "row_text_ids": [texts.add(r.text) for r in rows],
                    "row_created_at": [stamps[r.session] for r in rows],
                }
            )
            counts["pairs"] += 1
            counts["row_slots"] += len(rows)
            if len(batch) >= batch_pairs:
                writer.write_table(pa.Table.from_pylist(batch, schema=ROWS_SCHEMA))
                batch.clear()
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, schema=ROWS_SCHEMA))
        writer.close()
        texts.close()
        if counts["pairs"] == 0:
            raise EvalError(f"{dataset}: zero usable pairs under the {protocol} protocol")
        counts["unique_texts"] = len(texts.seen)
    log.info(
        "filter rows (%s, %s): %d pairs, %d rows, %d unique texts",
        protocol,
        granularity,
        counts["pairs"],
        counts["row_slots"],
        counts["unique_texts"],
    )
    return {k: counts[k] for k in ("pairs", "row_slots", "unique_texts")}
