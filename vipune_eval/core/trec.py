"""TREC run and qrels files: the interchange format of every result (one owner for both).

qrels: ``question_id 0 session_id 1`` per gold session. run: ``question_id Q0 session_id rank
score tag``, ranks from 1 and scores strictly decreasing by rank (the score is derived from the
rank), so any TREC tool (trec_eval, ir-measures, ranx) reads the same order whatever its
tie-break rule.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from vipune_eval.core.io import write_text
from vipune_eval.errors import EvalError

Run = dict[str, list[tuple[str, int, float]]]  # question_id → [(doc, rank, score)] by rank


def write_qrels(path: Path, gold: Mapping[str, Sequence[str]]) -> None:
    """``gold``: question_id → its gold documents, in the order they should be listed."""
    write_text(path, "".join(f"{qid} 0 {doc} 1\n" for qid, docs in gold.items() for doc in docs))


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        parts = line.split()
        if len(parts) != 4:
            raise EvalError(f"{path}:{number}: a qrels line is 'qid 0 docid rel', got {line!r}")
        qrels[parts[0]][parts[2]] = int(parts[3])
    return dict(qrels)


def run_lines(rankings: Iterable[tuple[str, Sequence[str]]], tag: str) -> str:
    """Run lines for ranked documents, best first; the score of rank r of n is n - r + 1."""
    lines = []
    for qid, docs in rankings:
        lines += [f"{qid} Q0 {doc} {rank} {len(docs) - rank + 1} {tag}\n" for rank, doc in enumerate(docs, start=1)]
    return "".join(lines)


def write_run(path: Path, rankings: Iterable[tuple[str, Sequence[str]]], tag: str) -> None:
    write_text(path, run_lines(rankings, tag))


def read_run(paths: Sequence[Path]) -> Run:
    """question_id → [(doc, rank, score)] in rank order, from one or more run files."""
    run: Run = defaultdict(list)
    for path in paths:
        for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
            parts = line.split()
            if len(parts) != 6:
                raise EvalError(f"{path}:{number}: a run line is 'qid Q0 docid rank score tag', got {line!r}")
            run[parts[0]].append((parts[2], int(parts[3]), float(parts[4])))
    for qid, hits in run.items():
        hits.sort(key=lambda h: h[1])
        scores = [s for _, _, s in hits]
        if any(a <= b for a, b in zip(scores, scores[1:])):
            raise EvalError(f"run for {qid} does not have strictly decreasing scores by rank")
        docs = [d for d, _, _ in hits]
        if len(set(docs)) != len(docs):
            raise EvalError(f"run for {qid} lists a document twice")
    return dict(run)
