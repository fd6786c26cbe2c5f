"""The report's paired comparisons: two runs compared pair by pair, metric by metric, overall
and per category, with Holm's correction, and each significant difference as a sentence.

Binary metrics (registry.measures.is_binary) get exact McNemar tests on the discordant pairs,
fractional ones paired sign-flip randomization tests; every difference gets a paired bootstrap
interval of mean(a - b) (core.intervals). Pair ids are sorted before resampling, so dict order
never changes a result.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from vipune_eval.core.intervals import bootstrap_intervals, check_resamples, check_settings
from vipune_eval.registry.measures import is_binary as metric_is_binary
from vipune_eval.stages.report.report_json import Compared, Comparison


def _values(values: Sequence[float], name: str = "values") -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values")
    return arr


def _pair(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    x, y = _values(a, "a"), _values(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"paired values differ in length: {x.size} vs {y.size}")
    d: np.ndarray = x - y
    return d


@lru_cache(maxsize=16)
def _signs(n: int, resamples: int, seed: int) -> np.ndarray:
    """(R, n) of ±1: one random bit per pair and resample (1 keeps the sign, 0 flips it), made once
    per process for a given n, R and seed and shared (read-only): every comparison of a report
    flips the same pairs."""
    rng = np.random.default_rng(seed)
    bits = np.unpackbits(np.frombuffer(rng.bytes(-(-resamples * n // 8)), dtype=np.uint8))
    signs = bits[: resamples * n].reshape(resamples, n).astype(np.float64) * 2.0 - 1.0
    signs.setflags(write=False)
    return signs


def _sign_flip_pvalues(d: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """Two-sided sign-flip randomization p-values of mean(d) for each column of ``d`` (n, m)."""
    n, m = d.shape
    p: np.ndarray = np.ones(m)
    if n == 0:
        return p
    signs = _signs(n, resamples, seed)
    observed = np.abs(d.sum(axis=0))
    flipped = np.abs(signs @ d)
    # tolerance so that a flip reproducing |sum| exactly is not lost to rounding
    count = (flipped >= observed - 1e-9).sum(axis=0)
    p = (count + 1.0) / (resamples + 1.0)
    p[np.all(d == 0, axis=0)] = 1.0
    return p


def _zero_or_one(values: Sequence[float] | np.ndarray) -> bool:
    """True when every value is exactly 0 or 1 (vacuously true for no values)."""
    arr = np.asarray(values, dtype=np.float64)
    return bool(np.all((arr == 0.0) | (arr == 1.0)))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts b and c."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative, got b={b}, c={c}")
    if b + c == 0:
        return 1.0
    # P(X <= min(b, c)) for X ~ Binomial(b + c, 1/2), summed exactly in integers: scipy.stats's
    # binom.cdf gives the same to a few ulps, but importing scipy.stats cost each report ~0.9 s
    n = b + c
    tail = Fraction(sum(math.comb(n, i) for i in range(min(b, c) + 1)), 2**n)
    return float(min(Fraction(1), 2 * tail))


def paired_randomization(a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided paired sign-flip randomization test of mean(a - b); p = (count + 1) / (R + 1)."""
    check_resamples(resamples)
    return float(_sign_flip_pvalues(_pair(a, b)[:, None], resamples, seed)[0])


def paired_bootstrap_interval(
    a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(a - b), resampling pairs."""
    check_settings(confidence, resamples)
    lo, hi = bootstrap_intervals(_pair(a, b)[:, None], confidence=confidence, resamples=resamples, seed=seed)[0]
    return (float(lo), float(hi))


def holm(pvalues: Mapping[str, float]) -> dict[str, float]:
    """Holm–Bonferroni adjusted p-values (step-down, monotone, capped at 1), same keys."""
    keys = list(pvalues)
    p = np.array([pvalues[k] for k in keys], dtype=np.float64)
    if np.any(np.isnan(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError("p-values must be in [0, 1]")
    m = len(keys)
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = adjusted
    return {k: float(v) for k, v in zip(keys, out)}


def _same_ids(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if only_a or only_b:

        def show(ids: list[str]) -> str:
            return ", ".join(ids[:10]) + (f" … ({len(ids)} in all)" if len(ids) > 10 else "")

        parts = []
        if only_a:
            parts.append(f"missing from b: {show(only_a)}")
        if only_b:
            parts.append(f"missing from a: {show(only_b)}")
        raise ValueError("runs must cover the same pair ids; " + "; ".join(parts))
    return sorted(a)


def _compare_matrix(
    x: np.ndarray, y: np.ndarray, binary: Sequence[bool], confidence: float, resamples: int, seed: int
) -> list[Compared]:
    """Paired comparison of each column of x (n, m) against the same column of y."""
    n, m = x.shape
    if n == 0:
        raise ValueError("no pairs to compare")
    is_binary = np.asarray(binary, dtype=bool)
    for col in np.flatnonzero(is_binary):
        if not (_zero_or_one(x[:, col]) and _zero_or_one(y[:, col])):
            raise ValueError("binary comparison needs values that are all 0 or 1")
    d = x - y
    intervals = bootstrap_intervals(d, confidence=confidence, resamples=resamples, seed=seed)
    p = np.ones(m)
    fractional = np.flatnonzero(~is_binary)
    if fractional.size:
        p[fractional] = _sign_flip_pvalues(d[:, fractional], resamples, seed)
    a_better = (d > 0).sum(axis=0)
    b_better = (d < 0).sum(axis=0)
    out: list[Compared] = []
    for j in range(m):
        if is_binary[j]:
            p[j] = mcnemar_exact(int(a_better[j]), int(b_better[j]))
        mean_a, mean_b = float(x[:, j].mean()), float(y[:, j].mean())
        out.append(
            {
                "a": mean_a,
                "b": mean_b,
                "difference": float(d[:, j].mean()),
                "interval": [float(intervals[j, 0]), float(intervals[j, 1])],
                "pairs": int(n),
                "a_better": int(a_better[j]),
                "b_better": int(b_better[j]),
                "test": "mcnemar-exact" if is_binary[j] else "paired-randomization",
                "p": float(p[j]),
                "p_holm": float(p[j]),  # until Holm's correction over the family (compare_runs, adjust_family)
                "significant": False,
            }
        )
    return out


def _matrix(rows: Mapping[str, Mapping[str, float]], qids: list[str], metrics: Sequence[str], name: str) -> np.ndarray:
    out = np.empty((len(qids), len(metrics)))
    for i, q in enumerate(qids):
        row = rows[q]
        for j, key in enumerate(metrics):
            if key not in row:
                raise ValueError(f"run {name}: pair {q} has no metric {key!r}")
            out[i, j] = row[key]
    if not np.all(np.isfinite(out)):
        raise ValueError(f"run {name} has non-finite metric values")
    return out


def _p_text(p: float) -> str:
    return "p_holm < 0.001" if p < 0.001 else f"p_holm = {p:.3f}"


def _sentence(label: str, r: Compared, name_a: str, name_b: str, confidence: float) -> str:
    lo, hi = r["interval"]
    return (
        f"{label}: {name_a} {r['a']:.3f} vs {name_b} {r['b']:.3f} "
        f"({100 * r['difference']:+.1f} points, unadjusted {100 * confidence:g}% CI "
        f"{100 * lo:+.1f} to {100 * hi:+.1f}, {_p_text(r['p_holm'])})"
    )


def compare_runs(
    a: Mapping[str, Mapping[str, float]],
    b: Mapping[str, Mapping[str, float]],
    metrics: Sequence[str],
    categories: Mapping[str, str],
    *,
    alpha: float = 0.05,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    name_a: str = "a",
    name_b: str = "b",
) -> Comparison:
    """Compare two runs metric by metric, overall and within each category.

    ``a`` and ``b`` map pair id → {metric key → value}; ``categories`` maps pair id → category
    (every compared pair needs one; extra entries are ignored). Holm's correction runs over
    all ``len(metrics) * (1 + number of categories)`` comparisons.
    """
    check_settings(confidence, resamples)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    metrics = list(metrics)
    if len(set(metrics)) != len(metrics):
        raise ValueError("metrics contains duplicates")
    qids = _same_ids(a, b)
    uncategorised = [q for q in qids if q not in categories]
    if uncategorised:
        raise ValueError(
            f"pairs without a category: {', '.join(uncategorised[:10])}"
            + (f" … ({len(uncategorised)} in all)" if len(uncategorised) > 10 else "")
        )
    x, y = _matrix(a, qids, metrics, name_a), _matrix(b, qids, metrics, name_b)
    binary = [metric_is_binary(k) for k in metrics]

    by_category: dict[str, list[int]] = {}
    for i, q in enumerate(qids):
        by_category.setdefault(categories[q], []).append(i)
    groups: list[tuple[str | None, np.ndarray]] = [(None, np.arange(len(qids)))]
    groups += [(cat, np.array(rows)) for cat, rows in sorted(by_category.items())]

    results: dict[tuple[str | None, str], Compared] = {}
    for cat, rows in groups:
        compared = _compare_matrix(x[rows], y[rows], binary, confidence, resamples, seed)
        for key, r in zip(metrics, compared):
            results[(cat, key)] = r

    order = list(results)
    adjusted = holm({str(i): results[k]["p"] for i, k in enumerate(order)})
    for i, k in enumerate(order):
        results[k]["p_holm"] = adjusted[str(i)]
        results[k]["significant"] = bool(adjusted[str(i)] < alpha)
    out: Comparison = {
        "overall": {key: results[(None, key)] for key in metrics},
        "per_category": {cat: {key: results[(cat, key)] for key in metrics} for cat, _ in groups if cat is not None},
        "alpha": alpha,
        "confidence": confidence,
        "names": [name_a, name_b],
        "correction": "holm",
        "comparisons": len(results),
        "summary": [],
    }
    out["summary"] = _summary(out, len(results))
    return out


def _entries(result: Comparison) -> list[tuple[str, Compared]]:
    out = [(key, r) for key, r in result["overall"].items()]
    out += [
        (f"{key} ({cat}, {r['pairs']} pairs)", r)
        for cat, rows in result["per_category"].items()
        for key, r in rows.items()
    ]
    return out


def _summary(result: Comparison, family: int, over: str = "") -> list[str]:
    """Each significant difference as a sentence, or that there is none among the ``family``'s
    comparisons (Holm-adjusted ``over`` them all)."""
    alpha, (name_a, name_b) = result["alpha"], result["names"]
    return [
        _sentence(label, r, name_a, name_b, result["confidence"]) for label, r in _entries(result) if r["significant"]
    ] or [
        f"No significant difference between {name_a} and {name_b} in any of the {family} comparisons "
        f"(Holm-adjusted{over}, alpha = {alpha:g})."
    ]


def compare_scored(
    a: Mapping[str, Any], b: Mapping[str, Any], keys: Sequence[str], name_a: str, name_b: str, alpha: float = 0.05
) -> Comparison:
    """Paired comparison of two scored runs (stages.score's metrics) on the pairs both scored
    (failed pairs drop out of both), by each pair's question type."""
    shared = sorted(set(a["per_query"]) & set(b["per_query"]))
    rows_a = {q: {k: a["per_query"][q][k] for k in keys} for q in shared}
    rows_b = {q: {k: b["per_query"][q][k] for k in keys} for q in shared}
    categories = {q: a["per_query"][q]["question_type"] for q in shared}
    return compare_runs(rows_a, rows_b, keys, categories, alpha=alpha, name_a=name_a, name_b=name_b)


def adjust_family(results: Mapping[str, Comparison]) -> dict[str, Comparison]:
    """Holm's correction over every comparison of several ``compare_runs`` results at once (e.g.
    each build against the primary), replacing each result's own per-comparison correction."""
    family = [(name, label, r) for name, result in results.items() for label, r in _entries(result)]
    adjusted = holm({str(i): r["p"] for i, (_, _, r) in enumerate(family)})
    for i, (_, _, r) in enumerate(family):
        r["p_holm"] = adjusted[str(i)]
    for result in results.values():
        for _, r in _entries(result):
            r["significant"] = bool(r["p_holm"] < result["alpha"])
        result["correction"] = f"holm over {len(family)} comparisons of {len(results)} runs"
        result["summary"] = _summary(result, len(family), f" over {len(results)} runs")
    return dict(results)
