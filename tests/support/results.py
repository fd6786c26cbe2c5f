"""A finished run's files read without the package, and its numbers recomputed from them.

The definitions here share no code with ``vipune_eval``: a workflow test that recomputes a number
with them checks the package's computation, not a copy of it.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from rank_bm25 import BM25Okapi

KS = [1, 5, 10]


def report(workdir: Path) -> dict[str, Any]:
    """The run's results/report.json."""
    return json.loads((workdir / "results/report.json").read_text())


def metrics(workdir: Path) -> dict[str, dict[str, float]]:
    """Retriever → its overall metrics, from the run's report."""
    return {name: entry["metrics"] for name, entry in report(workdir)["retrievers"].items()}


def run_files(workdir: Path) -> dict[str, bytes]:
    """The bytes of every TREC run file under results/runs/, by file name."""
    return {p.name: p.read_bytes() for p in sorted((workdir / "results/runs").glob("*.run"))}


def read_qrels(path: Path) -> dict[str, set[str]]:
    """Question id → its relevant document ids, from a TREC qrels file."""
    gold = defaultdict(set)
    for line in path.read_text().splitlines():
        qid, _, doc, rel = line.split()
        if int(rel) > 0:
            gold[qid].add(doc)
    return gold


def read_run(path: Path) -> dict[str, list[str]]:
    """Question id → its document ids best first, from a TREC run file."""
    ranked = defaultdict(list)
    for line in path.read_text().splitlines():
        qid, _, doc, rank, score, _ = line.split()
        ranked[qid].append((int(rank), float(score), doc))
    return {qid: [doc for _, _, doc in sorted(hits)] for qid, hits in ranked.items()}


def independent_metrics(gold: dict[str, set[str]], ranked: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """The definitions written out plainly, sharing no code with the package."""
    rows = {}
    for qid, relevant in gold.items():
        docs = ranked.get(qid, [])
        row = {}
        for k in KS:
            hits = len(relevant & set(docs[:k]))
            row[f"recall@{k}"] = hits / len(relevant)
            row[f"recall_any@{k}"] = float(hits > 0)
            row[f"recall_all@{k}"] = float(hits == len(relevant))
            dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(docs[:k]) if d in relevant)
            ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(relevant))))
            row[f"ndcg@{k}"] = dcg / ideal
        first = next((i for i, d in enumerate(docs) if d in relevant), None)
        row["mrr"] = 0.0 if first is None else 1 / (first + 1)
        rows[qid] = row
    return rows


def lme_order(corpus: list[str], question: str, n: int) -> list[int]:
    """LongMemEval's run_retrieval.py flat-bm25, spelled out: the corpus indices best first."""
    bm25 = BM25Okapi([doc.split(" ") for doc in corpus])
    scores = bm25.get_scores(question.split(" "))
    return list(np.argsort(scores)[::-1][:n])


def lme_corpus(entry: dict[str, Any]) -> tuple[list[str], list[str]]:
    """LongMemEval's session corpus of one instance, from the dataset JSON alone: keys are the
    user turns joined by a space, ids holding 'answer' become 'noans' without user-side evidence."""
    ids, corpus = [], []
    for sid, session in zip(entry["haystack_session_ids"], entry["haystack_sessions"]):
        users = [t for t in session if t["role"] == "user"]
        if "answer" in sid and not any(bool(t.get("has_answer")) for t in users):
            sid = sid.replace("answer", "noans")
        ids.append(sid)
        corpus.append(" ".join(t["content"] for t in users))
    return ids, corpus
