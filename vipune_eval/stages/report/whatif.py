"""The what-if lab's verdict: the variant chosen on one split, confirmed on the other.

The grid itself (config key ``whatif``, each point a named family setting) is
plan.whatif_grid's, checked at parse time; this module reads the scored runs only (the
report imports it, not the registry). ``analyse`` picks ``chosen``, the best on ``select_on`` (a
tie goes to the base's own setting when it is among the tied, else to the first in grid order),
and tests every variant against the base on the other split: the difference, a paired
randomisation p, a paired bootstrap interval, and Holm's correction over the whole grid (every
variant tried is one comparison). stages.report.sections.lab words the verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vipune_eval.core.filter_summary import SPLITS
from vipune_eval.stages.report.compare import holm, paired_bootstrap_interval, paired_randomization

ALPHA = 0.05
TIE_TOLERANCE = 1e-12


# ---------------------------------------------------------------- choose and confirm


def _values(per_query: dict[str, dict[str, Any]], measure: str, split: str) -> dict[str, float]:
    return {q: float(row[measure]) for q, row in per_query.items() if row["split"] == split}


def _mean(values: dict[str, float]) -> float | None:
    return sum(values.values()) / len(values) if values else None


def choose(scores: Sequence[float | None], base_index: int | None) -> int:
    """Index of the best score (None counts as -inf); a tie goes to ``base_index`` when it is
    among the tied, else to the first in grid order."""
    if not scores:
        raise ValueError("no variants to choose from")
    best = max(-np.inf if s is None else s for s in scores)
    tied = [i for i, s in enumerate(scores) if s is not None and abs(s - best) <= TIE_TOLERANCE]
    if not tied:  # every score is None
        return base_index if base_index is not None else 0
    return base_index if base_index in tied else tied[0]


def analyse(
    measure: str,
    select_on: str,
    base: dict[str, Any],
    variants: list[dict[str, Any]],
    resamples: int = 10_000,
    seed: int = 0,
) -> dict[str, Any]:
    """``base`` and each variant: {name, params, run, per_query: qid → {measure, split, ...}}.

    Returns report.json's ``whatif`` block (see the module docstring)."""
    confirm_on = next(s for s in SPLITS if s != select_on)
    base_values: dict[str, dict[str, float]] = {s: _values(base["per_query"], measure, s) for s in SPLITS}
    rows: list[dict[str, Any]] = []
    for v in variants:
        values: dict[str, dict[str, float]] = {s: _values(v["per_query"], measure, s) for s in SPLITS}
        shared = sorted(set(values[confirm_on]) & set(base_values[confirm_on]))
        a = [values[confirm_on][q] for q in shared]
        b = [base_values[confirm_on][q] for q in shared]
        row: dict[str, Any] = {
            "name": v["name"],
            "params": v["params"],
            "run": v["run"],
            **{s: _mean(values[s]) for s in SPLITS},
            "pairs": len(shared),
        }
        if shared:
            row["test_delta"] = float(np.mean(np.subtract(a, b)))
            row["p"] = paired_randomization(a, b, resamples=resamples, seed=seed)
            row["interval"] = list(paired_bootstrap_interval(a, b, resamples=resamples, seed=seed))
        else:
            row.update(test_delta=None, p=1.0, interval=None)
        rows.append(row)
    adjusted = holm({str(i): r["p"] for i, r in enumerate(rows)}) if rows else {}
    for i, r in enumerate(rows):
        r["p_holm"] = adjusted[str(i)]
    base_index = next((i for i, v in enumerate(variants) if v["params"] == base["params"]), None)
    # No pairs on a split: nothing can be chosen (or confirmed, or named best) on it.
    chosen = rows[choose([r[select_on] for r in rows], base_index)] if rows and base_values[select_on] else None
    best_confirm = (
        rows[choose([r[confirm_on] for r in rows], base_index)] if chosen and base_values[confirm_on] else None
    )
    confirmed = bool(
        chosen and chosen["test_delta"] is not None and chosen["test_delta"] > 0 and chosen["p_holm"] < ALPHA
    )
    return {
        "measure": measure,
        "select_on": select_on,
        "confirm_on": confirm_on,
        "tried": len(rows),
        "correction": f"holm over the {len(rows)} variants tried",
        "alpha": ALPHA,
        "base": {
            "name": base["name"],
            "params": base["params"],
            "run": base["run"],
            **{s: _mean(base_values[s]) for s in SPLITS},
            "pairs": {s: len(base_values[s]) for s in SPLITS},
        },
        "chosen": chosen["name"] if chosen else None,
        "chosen_is_base_setting": base_index is not None and chosen is rows[base_index],
        "confirmed": confirmed,
        f"best_on_{confirm_on}": best_confirm["name"] if best_confirm else None,
        "variants": rows,
    }
