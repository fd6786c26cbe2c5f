"""The held-out split: every pair is ``dev`` or ``test``, stably and stratified by category.

Tune on dev, report test. A pair's label depends only on its question_id, its category's pairs,
the seed and the fraction: the same on every machine and every run. Within each category the
pairs are ordered by sha256(seed, question_id) and the first round(fraction × n) are dev, so each
category's dev count is within one pair of fraction × n.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable

from vipune_eval.core.filter_summary import SPLITS

DEV, TEST = SPLITS


def rank_key(seed: int, question_id: str) -> str:
    return hashlib.sha256(f"vipune-eval split {seed}\n{question_id}".encode()).hexdigest()


def assign(pairs: Iterable[tuple[str, str]], seed: int, dev_fraction: float) -> dict[str, str]:
    """``pairs``: (question_id, category). Returns question_id → "dev" | "test"."""
    if not 0.0 <= dev_fraction <= 1.0:
        raise ValueError(f"split.dev_fraction must be in [0, 1], got {dev_fraction}")
    by_category: dict[str, list[str]] = defaultdict(list)
    for qid, category in pairs:
        by_category[category].append(qid)
    labels: dict[str, str] = {}
    for qids in by_category.values():
        ordered = sorted(qids, key=lambda q: (rank_key(seed, q), q))
        n_dev = int(dev_fraction * len(ordered) + 0.5)  # round half up, never banker's rounding
        labels.update({q: DEV if i < n_dev else TEST for i, q in enumerate(ordered)})
    return labels
