"""core.intervals: the Wilson and percentile-bootstrap intervals the score stage writes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from vipune_eval.core.intervals import bootstrap_intervals, wilson_interval


def bootstrap_interval(values, **options):
    """One column's interval, as score computes it for one metric."""
    lo, hi = bootstrap_intervals(np.asarray(values, dtype=float).reshape(-1, 1), **options)[0]
    return (float(lo), float(hi))


def test_wilson_known_values():
    lo, hi = wilson_interval(8, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    assert wilson_interval(10, 10)[1] == 1.0
    assert all(math.isnan(v) for v in wilson_interval(0, 0))
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


@pytest.mark.parametrize(
    "k,n,conf", [(8, 10, 0.95), (0, 10, 0.95), (3, 470, 0.95), (333, 470, 0.9), (469, 470, 0.99), (1, 1, 0.95)]
)
def test_wilson_matches_scipy(k, n, conf):
    ci = sps.binomtest(k, n).proportion_ci(confidence_level=conf, method="wilson")
    assert wilson_interval(k, n, conf) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_bootstrap_interval_contains_mean_and_shrinks():
    rng = np.random.default_rng(7)
    small, large = rng.random(30), rng.random(3000)
    lo_s, hi_s = bootstrap_interval(small, resamples=4000)
    lo_l, hi_l = bootstrap_interval(large, resamples=4000)
    assert lo_s < small.mean() < hi_s
    assert lo_l < large.mean() < hi_l
    # width ~ 1/sqrt(n): 100x the pairs -> ~10x narrower
    assert (hi_l - lo_l) < (hi_s - lo_s) / 5
    # roughly the normal-theory width for the mean of U(0,1)
    assert (hi_l - lo_l) == pytest.approx(2 * 1.96 * large.std() / math.sqrt(3000), rel=0.1)


def test_bootstrap_interval_deterministic_per_seed():
    values = np.random.default_rng(3).random(50)
    assert bootstrap_interval(values, seed=5) == bootstrap_interval(list(values), seed=5)
    assert bootstrap_interval(values, seed=5) != bootstrap_interval(values, seed=6)
    assert bootstrap_interval([0.4] * 20) == (pytest.approx(0.4), pytest.approx(0.4))
    assert all(math.isnan(v) for v in bootstrap_interval([]))


def test_bootstrap_intervals_of_columns_equal_one_bootstrap_per_column():
    """score computes every fractional metric's interval from one resample matrix: the same
    intervals as one bootstrap per metric, same seed."""

    rng = np.random.default_rng(4)
    x = rng.random((37, 5))
    both = bootstrap_intervals(x, seed=3, resamples=2000)
    for j in range(5):
        assert tuple(both[j]) == pytest.approx(bootstrap_interval(x[:, j], seed=3, resamples=2000), abs=1e-12)


def test_the_resamples_of_n_pairs_are_made_once_and_cannot_be_changed():
    """Issue 54: a report resamples the same pairs for every comparison; the count matrix is made
    once per n, R and seed, shared read-only, and gives the same intervals as a fresh one."""
    from vipune_eval.core.intervals import bootstrap_intervals, resample_counts

    values = np.random.default_rng(3).random((37, 2))
    first = bootstrap_intervals(values, resamples=500, seed=4)
    counts = resample_counts(37, 500, 4)
    assert counts is resample_counts(37, 500, 4) and not counts.flags.writeable
    assert counts.shape == (500, 37) and (counts.sum(axis=1) == 37).all()
    resample_counts.cache_clear()
    assert np.array_equal(bootstrap_intervals(values, resamples=500, seed=4), first)
