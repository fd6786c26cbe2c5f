"""Confidence intervals of a mean of per-pair metric values (what the score stage writes).

Per-pair values are floats in [0, 1], one per question/haystack pair. *Binary* metrics
(recall_any@k, recall_all@k) take only 0/1 and get Wilson intervals; *fractional* ones (recall@k,
ndcg@k, mrr) get percentile-bootstrap intervals. Resampling is vectorised: one resample-count
matrix per call, multiplied with an ``(n_pairs, n_metrics)`` matrix of values, so all metrics of
one group share the same resamples. Everything is seeded and deterministic. The report's paired
comparisons are stages.report.compare.
"""

from __future__ import annotations

from functools import lru_cache
from statistics import NormalDist

import numpy as np

# A percentile bootstrap over fewer pairs than this gives no honest interval (2 pairs of 1.0
# resample to [1.00, 1.00]): the score stage writes none, and the report says so.
MIN_BOOTSTRAP_PAIRS = 10


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def check_resamples(resamples: int) -> None:
    if int(resamples) != resamples or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples}")


def check_settings(confidence: float, resamples: int) -> None:
    _check_confidence(confidence)
    check_resamples(resamples)


@lru_cache(maxsize=16)
def resample_counts(n: int, resamples: int, seed: int) -> np.ndarray:
    """(R, n): how often each of n rows is drawn in each of ``resamples`` bootstrap resamples (n
    row indices drawn with replacement), as floats. Made once per process for a given n, R and
    seed and shared (read-only): a report resamples the same pairs for every comparison."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    idx += np.arange(resamples)[:, None] * n
    counts = np.bincount(idx.ravel(), minlength=resamples * n).reshape(resamples, n).astype(np.float64)
    counts.setflags(write=False)
    return counts


def _bootstrap_means(x: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """Column means of ``x`` (n, m) over ``resamples`` bootstrap resamples of its rows → (R, m):
    one matrix product with the resamples' count matrix."""
    n = x.shape[0]
    means: np.ndarray = (resample_counts(n, resamples, seed) @ x) / n
    return means


def _percentiles(means: np.ndarray, confidence: float) -> np.ndarray:
    """(R, m) resampled means → (m, 2) percentile intervals."""
    tail = (1.0 - confidence) / 2.0
    intervals: np.ndarray = np.quantile(means, [tail, 1.0 - tail], axis=0).T
    return intervals


def _bootstrap_intervals(x: np.ndarray, confidence: float, resamples: int, seed: int) -> np.ndarray:
    if x.shape[0] == 0:
        return np.full((x.shape[1], 2), np.nan)
    return _percentiles(_bootstrap_means(x, resamples, seed), confidence)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (nan, nan) when n = 0."""
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    _check_confidence(confidence)
    if n == 0:
        return (float("nan"), float("nan"))
    # the normal quantile (scipy.stats.norm.ppf), from the standard library: importing scipy
    # cost every score job ~0.25 s
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * np.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n))
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return (float(lo), float(hi))


def bootstrap_intervals(
    values: np.ndarray, *, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> np.ndarray:
    """``bootstrap_interval`` of each column of ``values`` (n, m) → (m, 2), from one resample
    matrix: column j's interval equals ``bootstrap_interval(values[:, j])`` with the same seed."""
    check_settings(confidence, resamples)
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2 or not np.all(np.isfinite(x)):
        raise ValueError(f"values must be a finite (n, m) matrix, got shape {x.shape}")
    return _bootstrap_intervals(x, confidence, resamples, seed)
