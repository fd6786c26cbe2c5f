"""A view's summary.json: its pairs counted per category and gold source, and its dev/test split
(the splits' names and rule are here too: the filter assigns them, the report and the lab read them).

Its shape, shared by its writer (stages.filter.pairs.run_pairs) and its reader (the report: a
view's ``summary``, report.json's ``dataset``).
"""

from __future__ import annotations

from typing import Literal, TypedDict

Split = Literal["dev", "test"]
SPLITS: tuple[Split, Split] = ("dev", "test")  # tune on dev, report test (stages.filter.split assigns them)
# stages.filter.split.assign's rule, as report.json's provenance states it
SPLIT_RULE = "per category, pairs ordered by sha256(seed, question_id); the first round(dev_fraction × n) are dev"


class FilterSplit(TypedDict):
    seed: int
    dev_fraction: float
    dev: int  # pairs
    test: int


class _FilterSummary(TypedDict):
    protocol: str
    granularity: str
    instances: int
    abstention: int
    pairs: int
    per_category: dict[str, int]  # category → pairs
    gold_source: dict[str, int]
    session_slots: int
    created_at_policy: str
    split: FilterSplit


class FilterSummary(_FilterSummary, total=False):
    """A view's summary.json (stages.filter.pairs); the keys below only for the official protocol."""

    skip_rule: str
    skipped_without_user_side_evidence: int
    pairs_all: int
    pairs_with_empty_gold: int
    pairs_all_with_empty_gold: int
