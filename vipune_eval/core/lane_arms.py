"""The lib lane's arms file: per persona, the two lists vipune's hybrid search fused (its semantic
arm and its BM25 arm, each hit's row and score, best first) with the RRF k it fused them with, and
the list it returned, as ``vipune-lane search --arms`` answered them (lane/src/arms.rs records
them inside vipune's own ``rrf_fusion``, compiled from the source under test). Written by
search-vipune-lib beside each shard's run file; read by the report and ``vipune-eval explain``
(stages.report.explain), which check them against the list they explain.

The vipune-lane gives the fused lists in the order vipune passed them; which is the semantic arm is told
by the vipune-lane's own semantic search of the same persona: its list (the first ``--limit`` hits of
the same vector scan) is the start of exactly one of them. Where that cannot be told, or the search
fused other than once or other than two lists, the persona's ``note`` says so and it has no arms.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from vipune_eval.core.io import atomic_path, read_parquet
from vipune_eval.errors import EvalError

LISTS = ("semantic", "bm25", "hybrid")  # the two arms, then the list the hybrid search returned
Hits = list[tuple[int, float | None]]  # (row index in the pair's rows, score), best first (rank = index + 1)

SCHEMA = pa.schema(
    [("question_id", pa.string()), ("k", pa.float64()), ("note", pa.string())]
    + [
        (f"{name}{part}", pa.list_(kind))
        for name in LISTS
        for part, kind in (("_rows", pa.int32()), ("_scores", pa.float64()))
    ]
)


@dataclass(frozen=True)
class PersonaArms:
    """One persona's arms and hybrid list. ``note``: why it has no arms (None: it has them)."""

    question_id: str
    k: float | None
    note: str | None
    semantic: Hits
    bm25: Hits
    hybrid: Hits

    def hits(self, name: str) -> Hits:
        return {"semantic": self.semantic, "bm25": self.bm25, "hybrid": self.hybrid}[name]


def from_answer(row_ids: list[str], answer: dict[str, Any], limit: int, source: str) -> PersonaArms:
    """A persona's arms from the vipune-lane's answer (its ``fusions``, ``semantic`` and ``hybrid``, their
    ids already checked to be the persona's rows, ``row_ids``); ``limit``: the search's --limit.
    A missing ``fusions`` is a protocol violation (``source`` names the vipune-lane)."""
    qid = answer["question_id"]
    index = {rid: i for i, rid in enumerate(row_ids)}

    def indexed(hits: list[Any]) -> Hits:
        try:
            return [(index[hit[0]], hit[1]) for hit in hits]
        except (KeyError, IndexError, TypeError):
            raise EvalError(
                f"persona {qid}: `{source}` recorded a fused list holding {hits!r:.200}, not rows "
                "of this persona (a protocol violation)"
            ) from None

    hybrid = indexed(answer["hybrid"])
    fusions = answer.get("fusions")
    if not isinstance(fusions, list):
        raise EvalError(
            f"persona {qid}: `{source}` was asked for its arms (--arms) and answered none (a protocol violation)",
            fix="build the vipune-lane again from this checkout's lane/ (`.ci/vipune/build.sh`)",
        )

    def without(note: str) -> PersonaArms:
        return PersonaArms(qid, None, note, [], [], hybrid)

    if "unrecorded_arms" in answer:
        return without(str(answer["unrecorded_arms"]))
    if len(fusions) != 1:
        return without(
            f"vipune's hybrid search called rrf_fusion {len(fusions)} times, not once: the vipune-lane "
            "cannot tell which call made the list"
        )
    lists = fusions[0].get("lists")
    if not isinstance(lists, list) or len(lists) != 2:
        return without(
            f"vipune's hybrid search fused {len(lists) if isinstance(lists, list) else 'no'} lists, "
            "not a semantic and a BM25 arm"
        )
    semantic = [list(hit) for hit in answer["semantic"]]
    starts = [
        i
        for i, hits in enumerate(lists)
        if [list(h) for h in hits[: len(semantic)]] == semantic
        and (len(semantic) == limit or len(hits) == len(semantic))
    ]
    if lists[0] == lists[1]:
        starts = [0]  # the same list twice: either is the semantic arm
    if len(starts) != 1:
        return without(
            "the vipune-lane's semantic search begins neither or both of the fused lists, so which "
            "is vipune's semantic arm cannot be told"
        )
    first = starts[0]
    return PersonaArms(qid, float(fusions[0]["k"]), None, indexed(lists[first]), indexed(lists[1 - first]), hybrid)


def write(path: Path, arms: Iterable[PersonaArms]) -> None:
    columns: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    for a in arms:
        columns["question_id"].append(a.question_id)
        columns["k"].append(a.k)
        columns["note"].append(a.note)
        for name in LISTS:
            columns[f"{name}_rows"].append([row for row, _ in a.hits(name)])
            columns[f"{name}_scores"].append([score for _, score in a.hits(name)])
    with atomic_path(path) as tmp:
        pq.write_table(pa.table(columns, schema=SCHEMA), tmp)


def read(paths: Iterable[Path], question_ids: set[str] | None = None) -> dict[str, PersonaArms]:
    """Question id → its arms, from a run's arms files (every persona, or those of ``question_ids``)."""
    out: dict[str, PersonaArms] = {}
    for path in paths:
        try:
            table = read_parquet(path)
        except (OSError, pa.ArrowInvalid) as exc:
            raise EvalError(
                f"cannot read the arms file {path}: {exc}",
                fix="rerun its search_vipune_lib job (delete the file and run the workflow)",
            ) from None
        if not table.schema.equals(SCHEMA):
            raise EvalError(
                f"{path} is not an arms file of this version: its columns are {table.schema.names}",
                fix="rerun its search_vipune_lib job (delete the file and run the workflow)",
            )
        if question_ids is not None:
            table = table.filter(pc.is_in(table.column("question_id"), pa.array(sorted(question_ids), pa.string())))
        for row in table.to_pylist():
            lists = {name: list(zip(row[f"{name}_rows"], row[f"{name}_scores"])) for name in LISTS}
            out[row["question_id"]] = PersonaArms(row["question_id"], row["k"], row["note"], **lists)
    return out
