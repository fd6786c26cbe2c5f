"""stages.report.compare: paired tests, Holm's correction and compare_runs, the report's comparisons."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from vipune_eval.core.intervals import bootstrap_intervals
from vipune_eval.registry.measures import is_binary as metric_is_binary
from vipune_eval.stages.report.compare import (
    _zero_or_one,
    adjust_family,
    compare_runs,
    holm,
    mcnemar_exact,
    paired_bootstrap_interval,
    paired_randomization,
)


def compare(a, b, key, **options):
    """One metric's comparison of two runs over the same pairs, as compare_runs makes it."""
    return compare_runs(
        {q: {key: v} for q, v in a.items()},
        {q: {key: v} for q, v in b.items()},
        [key],
        {q: "all" for q in a},
        **options,
    )["overall"][key]


def test_zero_or_one():
    assert _zero_or_one([0.0, 1.0, 1, 0])
    assert not _zero_or_one([0.0, 0.5, 1.0])
    assert not _zero_or_one([1.0000001])


def test_metric_is_binary():
    assert metric_is_binary("recall_any@5") and metric_is_binary("recall_all@10")
    assert not any(metric_is_binary(k) for k in ("recall@5", "ndcg@5", "mrr"))


# ---------------------------------------------------------------- paired tests


def test_mcnemar_exact_known_values():
    assert mcnemar_exact(1, 9) == 0.021484375  # 2 * (1 + 10) / 2**10, exactly
    assert mcnemar_exact(9, 1) == mcnemar_exact(1, 9)
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 0) == 1.0
    for b, c in [(1, 9), (0, 6), (3, 12), (20, 31), (7, 8)]:
        assert mcnemar_exact(b, c) == pytest.approx(sps.binomtest(b, b + c, 0.5).pvalue, rel=1e-9)


def test_mcnemar_exact_is_scipys_binomial_tail_to_the_last_bits():
    """The exact integer sum is scipy.stats.binom.cdf's p-value (which the report used to import,
    ~0.9 s each) to within a few ulps, for every split of up to 500 discordant pairs."""
    for n in (*range(1, 60), 99, 100, 233, 470, 500):
        for b in range(0, n // 2 + 1, max(1, n // 40)):
            expected = min(1.0, 2.0 * sps.binom.cdf(b, n, 0.5))
            assert mcnemar_exact(b, n - b) == pytest.approx(expected, rel=1e-13, abs=1e-300), (b, n)


def test_paired_randomization_identical_runs():
    a = np.random.default_rng(0).random(40)
    assert paired_randomization(a, a) == 1.0


def test_paired_randomization_clearly_better_run():
    rng = np.random.default_rng(1)
    b = rng.random(100) * 0.8
    a = b + 0.1 + rng.normal(0, 0.05, 100)
    p = paired_randomization(a, b)
    assert p < 0.01
    assert p == pytest.approx(1 / 10_001)  # no flip reaches the observed mean
    # and symmetric in a, b
    assert paired_randomization(b, a) == p


def test_paired_randomization_matches_exact_enumeration():
    d = np.array([0.5, 0.2, 0.1, -0.15])
    observed = abs(d.sum())
    flips = [abs((np.array(s) * d).sum()) for s in itertools.product([1, -1], repeat=4)]
    exact = sum(f >= observed - 1e-12 for f in flips) / 16
    # |sum| >= 0.65 for (+,+,+,+), (+,+,+,-), (+,+,-,+) and their negations: 6 of 16
    assert exact == pytest.approx(6 / 16)
    p = paired_randomization(d, np.zeros(4), resamples=20_000, seed=2)
    assert p == pytest.approx(exact, abs=0.02)


def test_paired_bootstrap_interval():
    rng = np.random.default_rng(4)
    b = rng.random(200)
    a = np.clip(b + 0.05 + rng.normal(0, 0.1, 200), 0, 1)
    lo, hi = paired_bootstrap_interval(a, b)
    assert lo < (a - b).mean() < hi
    assert lo > 0
    assert (lo, hi) == tuple(bootstrap_intervals(np.asarray(a - b)[:, None])[0])  # same resamples, same seed
    with pytest.raises(ValueError):
        paired_bootstrap_interval([0.1, 0.2], [0.1])


def test_holm_known_values():
    adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005})
    assert list(adjusted) == ["a", "b", "c", "d"]
    assert adjusted == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06, "d": 0.02})
    assert holm({"x": 0.6, "y": 0.7}) == {"x": 1.0, "y": 1.0}
    assert holm({}) == {}


# ---------------------------------------------------------------- compare


def test_compare_binary_uses_mcnemar():
    a = {f"q{i}": 1.0 for i in range(10)}
    b = {f"q{i}": (1.0 if i == 0 else 0.0) for i in range(10)}
    b["q1"], a["q1"] = 1.0, 0.0  # one discordant pair the other way
    r = compare(a, b, "recall_any@5")
    assert r["test"] == "mcnemar-exact"
    assert (r["a_better"], r["b_better"], r["pairs"]) == (8, 1, 10)
    assert r["p"] == pytest.approx(mcnemar_exact(8, 1))
    assert r["difference"] == pytest.approx(r["a"] - r["b"]) == pytest.approx(0.7)
    lo, hi = r["interval"]
    assert lo <= 0.7 <= hi
    with pytest.raises(ValueError):
        compare({"q": 0.5}, {"q": 1.0}, "recall_any@5")


def test_compare_fractional_order_independent_and_key_check():
    rng = np.random.default_rng(5)
    qids = [f"q{i:02d}" for i in range(30)]
    a = {q: float(v) for q, v in zip(qids, rng.random(30))}
    b = {q: float(v) for q, v in zip(qids, rng.random(30))}
    r = compare(a, b, "ndcg@5", resamples=2000)
    assert r["test"] == "paired-randomization"
    reversed_a = dict(reversed(list(a.items())))
    assert compare(reversed_a, b, "ndcg@5", resamples=2000) == r
    sorted_ids = sorted(qids)
    assert r["p"] == paired_randomization([a[q] for q in sorted_ids], [b[q] for q in sorted_ids], resamples=2000)
    del b["q07"]
    with pytest.raises(ValueError, match="q07"):
        compare(a, b, "ndcg@5")


METRICS = ["recall@5", "recall_any@5", "ndcg@5", "mrr"]


def _rows(n_per_cat: int, better_in: str | None, seed: int):
    """Two runs over categories x, y, z; run a beats run b only within ``better_in``."""
    rng = np.random.default_rng(seed)
    a, b, categories = {}, {}, {}
    for cat in ("x", "y", "z"):
        for i in range(n_per_cat):
            q = f"{cat}{i:03d}"
            categories[q] = cat
            hit = float(rng.random() < 0.5)
            base = float(rng.random() * 0.6)
            row_b = {"recall@5": base, "recall_any@5": hit, "ndcg@5": base * 0.9, "mrr": base * 0.8}
            row_a = dict(row_b)
            if cat == better_in:
                row_a = {
                    "recall@5": base + 0.4,
                    "recall_any@5": 1.0,
                    "ndcg@5": base * 0.9 + 0.3,
                    "mrr": base * 0.8 + 0.2,
                }
                row_b["recall_any@5"] = 0.0 if i % 10 else 1.0
            elif i % 4 == 0:  # symmetric noise: some pairs favour a, as many favour b
                sign = 1.0 if i % 8 == 0 else -1.0
                row_a = {k: v for k, v in row_b.items()}
                row_a["recall@5"] = min(1.0, max(0.0, base + sign * 0.1))
                row_a["recall_any@5"] = 1.0 - hit
            a[q], b[q] = row_a, row_b
    return a, b, categories


def test_compare_runs_structure():
    a, b, cats = _rows(20, None, seed=0)
    result = compare_runs(a, b, METRICS, cats, resamples=2000, name_a="vipune", name_b="hybrid")
    assert set(result) == {
        "overall",
        "per_category",
        "alpha",
        "correction",
        "comparisons",
        "summary",
        "confidence",
        "names",
    }
    assert result["correction"] == "holm" and result["alpha"] == 0.05
    assert result["comparisons"] == len(METRICS) * 4
    assert list(result["per_category"]) == ["x", "y", "z"]
    for group in [result["overall"], *result["per_category"].values()]:
        assert list(group) == METRICS
        for key, r in group.items():
            assert r["test"] == ("mcnemar-exact" if key == "recall_any@5" else "paired-randomization")
            assert r["p"] <= r["p_holm"] <= 1.0
            assert r["significant"] is False
            assert len(r["interval"]) == 2
    assert result["overall"]["mrr"]["pairs"] == 60
    assert result["per_category"]["y"]["mrr"]["pairs"] == 20
    assert result["summary"] == [
        f"No significant difference between vipune and hybrid in any of the {len(METRICS) * 4} comparisons "
        "(Holm-adjusted, alpha = 0.05)."
    ]
    # Holm over a family of runs: the same words, over every comparison of every run
    family = adjust_family({"vipune": result, "other": compare_runs(a, b, METRICS, cats, resamples=500)})
    assert family["vipune"]["correction"] == f"holm over {len(METRICS) * 8} comparisons of 2 runs"
    assert family["vipune"]["summary"] == [
        f"No significant difference between vipune and hybrid in any of the {len(METRICS) * 8} comparisons "
        "(Holm-adjusted over 2 runs, alpha = 0.05)."
    ]


def test_compare_runs_flags_only_the_better_category():
    a, b, cats = _rows(40, "y", seed=1)
    result = compare_runs(a, b, METRICS, cats, resamples=2000, name_a="vipune", name_b="hybrid")
    for key in METRICS:
        assert result["per_category"]["y"][key]["significant"], key
        assert result["per_category"]["y"][key]["difference"] > 0
        assert not result["per_category"]["x"][key]["significant"], key
        assert not result["per_category"]["z"][key]["significant"], key
    # Holm: adjusted p is at least the raw p, and the raw p of 16 tests times at most 16
    for group in [result["overall"], *result["per_category"].values()]:
        for r in group.values():
            assert r["p"] <= r["p_holm"] <= min(1.0, 16 * r["p"]) + 1e-12
    sentences = result["summary"]
    pairs = result["per_category"]["y"]["recall@5"]["pairs"]
    assert any(s.startswith(f"recall@5 (y, {pairs} pairs): vipune") for s in sentences)  # the count beside it
    assert not any("(x," in s or "(z," in s for s in sentences)
    y = result["per_category"]["y"]["recall@5"]
    expected = f"{100 * y['difference']:+.1f} points"
    assert any(expected in s and "unadjusted 95% CI" in s and "p_holm" in s for s in sentences)


def test_compare_runs_matches_one_metric_at_a_time():
    a, b, cats = _rows(15, "x", seed=2)
    result = compare_runs(a, b, METRICS, cats, resamples=1000, seed=3)
    for key in METRICS:
        for cat in (None, "x", "z"):
            ids = [q for q in a if cat is None or cats[q] == cat]
            single = compare({q: a[q][key] for q in ids}, {q: b[q][key] for q in ids}, key, resamples=1000, seed=3)
            got = result["overall"][key] if cat is None else result["per_category"][cat][key]
            # same resamples: equal up to rounding of the matrix products
            assert got["interval"] == pytest.approx(single["interval"], abs=1e-12)
            rest = [k for k in single if k not in ("interval", "p_holm", "significant")]
            assert {k: got[k] for k in rest} == {k: single[k] for k in rest}


def test_compare_runs_rejects_mismatched_or_incomplete_input():
    a, b, cats = _rows(5, None, seed=4)
    extra = dict(a, extra_q={k: 0.0 for k in METRICS})
    with pytest.raises(ValueError, match="extra_q"):
        compare_runs(extra, b, METRICS, cats)
    with pytest.raises(ValueError, match="x000"):
        compare_runs(a, b, METRICS, {q: c for q, c in cats.items() if q != "x000"})
    with pytest.raises(ValueError, match="recall@10"):
        compare_runs(a, b, METRICS + ["recall@10"], cats)
