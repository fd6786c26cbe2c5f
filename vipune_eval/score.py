"""score: TREC run + qrels → recall@k and friends, overall and per category.

Measures come from ir-measures (trec_eval through pytrec-eval-terrier) where it computes the
same thing: ``R@k`` is recall@k = |gold ∩ top-k| / |gold|, ``Success@k`` is recall_any@k,
``nDCG@k`` uses rel / log2(rank + 1), ``RR`` is the reciprocal rank. recall_all@k is
``R@k == 1`` per pair. A pair missing from the run retrieved nothing and scores 0 everywhere.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import ir_measures
import numpy as np

from .io import EvalError, atomic_path, write_json
from .stats import bootstrap_interval, metric_is_binary, wilson_interval


def measure_names(ks: list[int]) -> dict[str, str]:
    """Our metric key → the ir-measures measure computing it (recall_all is derived)."""
    names = {}
    for k in ks:
        names[f"recall@{k}"] = f"R@{k}"
        names[f"recall_any@{k}"] = f"Success@{k}"
        names[f"ndcg@{k}"] = f"nDCG@{k}"
    names["mrr"] = "RR"
    return names


def metric_keys(ks: list[int]) -> list[str]:
    keys = [f"{m}@{k}" for m in ("recall", "recall_any", "recall_all", "ndcg") for k in ks]
    return keys + ["mrr"]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        parts = line.split()
        if len(parts) != 4:
            raise EvalError(f"{path}:{number}: a qrels line is 'qid 0 docid rel', got {line!r}")
        qrels[parts[0]][parts[2]] = int(parts[3])
    return dict(qrels)


def read_run(paths: list[Path]) -> dict[str, list[tuple[str, int, float]]]:
    """qid → [(docid, rank, score)] in rank order, from one or more run files."""
    run: dict[str, list[tuple[str, int, float]]] = defaultdict(list)
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
    return dict(run)


def per_query(qrels: dict[str, dict[str, int]], run: dict[str, list[tuple[str, int, float]]],
              ks: list[int]) -> dict[str, dict[str, float]]:
    """Every metric for every pair in the qrels (pairs absent from the run score 0)."""
    names = measure_names(ks)
    measures = {ir_measures.parse_measure(m): key for key, m in names.items()}
    run_dict = {qid: {doc: score for doc, _, score in hits} for qid, hits in run.items()}
    values: dict[str, dict[str, float]] = {qid: {key: 0.0 for key in names} for qid in qrels}
    for metric in ir_measures.iter_calc(list(measures), qrels, run_dict):
        if metric.query_id in values:
            values[metric.query_id][measures[metric.measure]] = float(metric.value)
    for row in values.values():
        for k in ks:
            row[f"recall_all@{k}"] = 1.0 if row[f"recall@{k}"] >= 1.0 - 1e-9 else 0.0
    return values


def mean_metrics(rows: list[dict[str, float]], ks: list[int]) -> dict[str, float]:
    return {key: sum(r[key] for r in rows) / len(rows) for key in metric_keys(ks)}


def metric_intervals(rows: list[dict[str, float]], ks: list[int]) -> dict[str, list[float]]:
    """95% intervals: Wilson for the per-pair binary metrics, a seeded bootstrap otherwise."""
    out = {}
    for key in metric_keys(ks):
        values = [r[key] for r in rows]
        if metric_is_binary(key):
            lo, hi = wilson_interval(int(round(sum(values))), len(values))
        else:
            lo, hi = bootstrap_interval(values, seed=0)
        out[key] = [lo, hi]
    return out


def summarise(rows: list[dict[str, float]], ks: list[int]) -> dict[str, Any]:
    return {**mean_metrics(rows, ks), "pairs": len(rows), "intervals": metric_intervals(rows, ks)}


def run_score(qrels_path: Path, categories: dict[str, str], run_paths: list[Path], ks: list[int],
              name: str, run_out: Path, metrics_out: Path,
              failed: dict[str, str] | None = None,
              search_seconds: dict[str, float] | None = None) -> dict[str, Any]:
    """Metrics of one run. Pairs in ``failed`` (the retriever errored) are left out of every
    average and listed, never scored as 0."""
    failed = failed or {}
    qrels = {qid: docs for qid, docs in read_qrels(qrels_path).items() if qid not in failed}
    run = read_run(run_paths)
    unknown = sorted(set(run) - set(qrels) - set(failed))
    if unknown:
        raise EvalError(f"run {name} has pairs that are not in {qrels_path}: {unknown[:5]}")
    if not qrels:
        raise EvalError(f"run {name}: every pair failed ({len(failed)}); see its status files")
    values = per_query(qrels, run, ks)
    by_category: dict[str, list[dict[str, float]]] = defaultdict(list)
    for qid, row in values.items():
        by_category[categories[qid]].append(row)
    result = {
        "retriever": name, "pairs": len(values), "run": str(run_out), "failed": failed,
        "metrics": mean_metrics(list(values.values()), ks),
        "intervals": metric_intervals(list(values.values()), ks),
        "per_category": {cat: summarise(rows, ks) for cat, rows in sorted(by_category.items())},
        "per_query": {qid: {**row, "question_type": categories[qid],
                            "ranked": [d for d, _, _ in run.get(qid, [])]}
                      for qid, row in sorted(values.items())},
    }
    if search_seconds:
        times = np.array(list(search_seconds.values()))
        result["search_seconds"] = {"p50": float(np.percentile(times, 50)),
                                    "p95": float(np.percentile(times, 95)),
                                    "max": float(times.max()), "calls": len(times)}
    with atomic_path(run_out) as tmp:
        tmp.write_text("".join(
            f"{qid} Q0 {doc} {rank} {score:g} {name}\n"
            for qid in sorted(run) for doc, rank, score in run[qid]), encoding="utf-8")
    write_json(metrics_out, result)
    return result
