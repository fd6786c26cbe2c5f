"""score: TREC run + qrels → the view's measures per pair, overall, per category and per split.

Each measure of registry.measures says what computes it (``Measure.computed_by``): ir-measures
(trec_eval through pytrec-eval-terrier: ``R@k`` is recall@k = |gold ∩ top-k| / |gold|,
``Success@k`` recall_any@k, ``nDCG@k`` with rel / log2(rank + 1), ``RR`` the reciprocal rank),
its own formula (recall_all@k: every gold document in the top k), or, under the official protocol,
LongMemEval's own code (core.longmemeval: recall_any, recall_all, ndcg_any, and its turn→session
scoring). A pair missing from the run retrieved nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import ir_measures
import numpy as np

from vipune_eval.core import longmemeval, trec
from vipune_eval.core.failed_pair import FailedPair
from vipune_eval.core.intervals import MIN_BOOTSTRAP_PAIRS, bootstrap_intervals, wilson_interval
from vipune_eval.core.io import read_json, read_parquet, write_json
from vipune_eval.core.ranking_settings import RankingSettings
from vipune_eval.core.run_metrics import Metrics, Summary
from vipune_eval.errors import EvalError
from vipune_eval.registry import measures


def per_query(
    qrels: dict[str, dict[str, int]],
    run: trec.Run,
    ks: Sequence[int],
    names: Sequence[str] = measures.SEED,
    official: bool = False,
    turn_to_session: bool = False,
    gold: dict[str, list[str]] | None = None,
) -> dict[str, dict[str, float]]:
    """Every measure of ``names`` for every pair of ``gold`` (default: the qrels' pairs).

    ``official``: the measures LongMemEval's code defines follow it (a pair without gold then
    scores recall_all = 1, the others 0), on the ranking with a repeated session's copies read
    under its own id; ``turn_to_session``: the run lists turns and LongMemEval's turn→session
    rule scores them.
    """
    gold = gold if gold is not None else {q: [d for d, r in docs.items() if r > 0] for q, docs in qrels.items()}
    keys = measures.keys(ks, names)
    values: dict[str, dict[str, float]] = {qid: dict.fromkeys(keys, 0.0) for qid in gold}
    by: dict[str, list[str]] = defaultdict(list)  # what computes it → its metric keys
    for key in keys:
        by[measures.measure_of(key).computed_by(official)].append(key)
    trec_keys = {ir_measures.parse_measure(_ir_measures_form(key)): key for key in by[measures.IR_MEASURES]}
    if trec_keys:
        run_dict = {qid: {doc: score for doc, _, score in hits} for qid, hits in run.items()}
        judged = {q: docs for q, docs in qrels.items() if q in values}
        for metric in ir_measures.iter_calc(list(trec_keys), judged, run_dict):
            values[metric.query_id][trec_keys[metric.measure]] = float(metric.value)
    # LongMemEval's measures are at a cut-off k, every one
    lme_ks = sorted({k for key in by[measures.LONGMEMEVAL] if (k := measures.cutoff(key)) is not None})
    for qid, row in values.items():
        ranked = [doc for doc, _, _ in run.get(qid, [])]
        if official:  # a repeated session's copies count under its own id, as in LongMemEval
            ranked = [longmemeval.base_id(doc) for doc in ranked]
        for key in by[measures.OWN]:
            compute = measures.measure_of(key).compute
            assert compute is not None  # computed_by says OWN for a measure with its own compute only
            row[key] = compute(ranked, gold[qid], measures.cutoff(key))
        for k in lme_ks:
            scores = (
                longmemeval.evaluate_turn_to_session(ranked, gold[qid], k)
                if turn_to_session
                else longmemeval.evaluate(ranked, gold[qid], k, len(gold[qid]))
            )
            row.update(
                {
                    key: scores[measures.measure_of(key).name]
                    for key in by[measures.LONGMEMEVAL]
                    if measures.cutoff(key) == k
                }
            )
    return values


def _ir_measures_form(key: str) -> str:
    """The ir-measures form of a metric key that ir-measures computes (``computed_by``)."""
    form = measures.measure_of(key).ir_measures
    assert form is not None  # computed_by says IR_MEASURES for a measure with an ir-measures form only
    return form.format(k=measures.cutoff(key))


def mean_metrics(rows: list[dict[str, float]], keys: Sequence[str]) -> dict[str, float]:
    return {key: sum(r[key] for r in rows) / len(rows) for key in keys}


def metric_intervals(rows: list[dict[str, float]], keys: Sequence[str]) -> dict[str, list[float] | None]:
    """95% intervals: Wilson for the per-pair binary metrics (sound on few pairs too), a seeded
    bootstrap otherwise (every fractional metric from one resample matrix: the same resamples, so
    the same intervals, as one bootstrap per metric). None for a fractional metric over fewer than
    ``MIN_BOOTSTRAP_PAIRS`` pairs: resampling so few values gives no honest interval."""
    out: dict[str, list[float] | None] = {}
    fractional = [key for key in keys if not measures.is_binary(key)]
    for key in keys:
        if measures.is_binary(key):
            lo, hi = wilson_interval(int(round(sum(r[key] for r in rows))), len(rows))
            out[key] = [lo, hi]
    if fractional and len(rows) < MIN_BOOTSTRAP_PAIRS:
        out.update(dict.fromkeys(fractional))
    elif fractional:
        matrix = np.array([[r[key] for key in fractional] for r in rows], dtype=np.float64).reshape(-1, len(fractional))
        for key, (lo, hi) in zip(fractional, bootstrap_intervals(matrix, seed=0)):
            out[key] = [float(lo), float(hi)]
    return {key: out[key] for key in keys}


def summarise(rows: list[dict[str, float]], keys: Sequence[str]) -> Summary:
    # cast: besides its typed keys a Summary holds a mean under each metric key
    return cast(Summary, {**mean_metrics(rows, keys), "pairs": len(rows), "intervals": metric_intervals(rows, keys)})


def read_status(paths: Sequence[Path]) -> tuple[dict[str, FailedPair], dict[str, float], dict[str, Any] | None]:
    """Failed pairs, per-query search seconds and what the searches were made from (None where a
    shard does not say: written by an older harness) of a lane's shards (both lanes write status
    files): each distinct setting the shards searched with (one, unless shards of other runs were
    mixed) and each pair's digests (core.persona.ShardSearch.searched)."""
    failed: dict[str, FailedPair] = {}
    seconds: dict[str, float] = {}
    settings: list[dict[str, Any]] = []
    personas: dict[str, list[str]] | None = {}
    for path in paths:
        shard = read_json(path)
        failed.update(shard["failed"])
        seconds.update(shard["search_seconds"])
        if "searched" not in shard or personas is None:
            personas = None
            continue
        if shard["searched"]["settings"] not in settings:
            settings.append(shard["searched"]["settings"])
        personas.update(shard["searched"]["personas"])
    searched = (
        {"settings": settings, "personas": dict(sorted(personas.items()))} if paths and personas is not None else None
    )
    return failed, seconds, searched


@dataclass(frozen=True)
class Scoring:
    """What a run is scored with (the view's cut-offs and measures, LongMemEval's turn→session
    rule) and what its searches ranked to (core.ranking_settings), as the config of the run that
    scores it states them.
    Its metrics record it (``scored_with``), so the report checks the settings it states against
    those its runs were made with: with ``--rerun-triggers mtime`` a changed setting reruns none
    of them. plan.manifest writes the view's, of the same keys, at parse time."""

    ks: list[int]
    measure_names: list[str]
    ranking_settings: RankingSettings
    turn_to_session: bool = False


def run_score(
    qrels: Path,
    pairs: Path,
    runs: list[Path],
    scoring: Scoring,
    name: str,
    run_out: Path,
    metrics_out: Path,
    status: list[Path] | None = None,
) -> Metrics:
    """Metrics of one run, and the ``scoring`` they were made with. Pairs that failed in a lane
    (status files) are left out of every average and listed, never scored as 0."""
    ks, names, turn_to_session = scoring.ks, tuple(scoring.measure_names), scoring.turn_to_session
    keys = measures.keys(ks, names)
    failed, search_seconds, searched = read_status(status or [])
    table = read_parquet(
        pairs, columns=["question_id", "question_type", "split", "gold", "gold_source", "user_side_evidence"]
    ).to_pylist()
    official = any(p["gold_source"].startswith("official") for p in table)
    info = {p["question_id"]: p for p in table if p["question_id"] not in failed}
    judged = {qid: docs for qid, docs in trec.read_qrels(qrels).items() if qid in info}
    stale = [q for q, p in info.items() if sorted(p["gold"]) != sorted(judged.get(q, {}))]
    if stale:
        raise EvalError(f"{qrels} and {pairs} disagree on the gold of {stale[:5]}: rerun the filter")
    run = trec.read_run(runs)
    unknown = sorted(set(run) - set(info) - set(failed))
    if unknown:
        raise EvalError(f"run {name} has pairs that are not in {pairs}: {unknown[:5]}")
    if not info:
        raise EvalError(f"run {name}: every pair failed ({len(failed)}); see its status files")
    values = per_query(judged, run, ks, names, official, turn_to_session, gold={q: p["gold"] for q, p in info.items()})
    # The official protocol's two question sets: `metrics` over the pairs run_retrieval.py
    # averages (its skip rule), `metrics_all` over every pair (print_retrieval_metrics.py's).
    averaged = {q: row for q, row in values.items() if not official or info[q]["user_side_evidence"]}
    if not averaged:
        raise EvalError(f"run {name}: no pair of {pairs} passes run_retrieval.py's skip rule")
    groups: dict[str, dict[str, list[dict[str, float]]]] = {
        "per_category": defaultdict(list),
        "per_split": defaultdict(list),
    }
    for qid, row in averaged.items():
        groups["per_category"][info[qid]["question_type"]].append(row)
        groups["per_split"][info[qid]["split"]].append(row)
    rows = list(averaged.values())
    result: Metrics = {
        "retriever": name,
        "pairs": len(averaged),
        "run": str(run_out),
        "failed": failed,
        "metrics": mean_metrics(rows, keys),
        "intervals": metric_intervals(rows, keys),
        "per_category": {g: summarise(r, keys) for g, r in sorted(groups["per_category"].items())},
        "per_split": {g: summarise(r, keys) for g, r in sorted(groups["per_split"].items())},
        "short_lists": sum(len(run.get(q, [])) < max(ks) for q in averaged),
        "per_query": {
            qid: {
                **row,
                "question_type": info[qid]["question_type"],
                "split": info[qid]["split"],
                **({"averaged": qid in averaged} if official else {}),
                "ranked": [d for d, _, _ in run.get(qid, [])],
            }
            for qid, row in sorted(values.items())
        },
        "scored_with": asdict(scoring),
    }
    if official:  # the official protocol's second question set (print_retrieval_metrics.py's)
        every = list(values.values())
        result["pairs_all"], result["metrics_all"] = len(every), mean_metrics(every, keys)
        result["intervals_all"] = metric_intervals(every, keys)
    if searched is not None:
        result["searched"] = searched
    if search_seconds:
        times = np.array(list(search_seconds.values()))
        result["search_seconds"] = {
            "p50": float(np.percentile(times, 50)),
            "p95": float(np.percentile(times, 95)),
            "max": float(times.max()),
            "calls": len(times),
        }
    trec.write_run(run_out, ((qid, [d for d, _, _ in run[qid]]) for qid in sorted(run)), name)
    write_json(metrics_out, result)
    return result
