"""core/filter_summary.py: a view's summary.json has the keys its shape declares, as the filter writes
it for either protocol (a TypedDict is not checked when the file is read back)."""

from __future__ import annotations

import json

import pytest

from support.synthetic import write_dataset
from vipune_eval.core.filter_summary import FilterSplit, FilterSummary
from vipune_eval.stages.filter.pairs import run_pairs


@pytest.mark.parametrize("protocol", ["seed", "official"])
def test_the_filter_writes_the_declared_keys(tmp_path, protocol):
    write_dataset(tmp_path / "data.json", instances=12, abstention=2, sessions_per_haystack=6, filler_pool=10, seed=3)
    out = tmp_path / "summary.json"
    returned = run_pairs(
        tmp_path / "data.json", protocol, "session", tmp_path / "p.parquet", tmp_path / "q.txt", out, None, 0, 0.25
    )
    written = json.loads(out.read_text())
    assert written == returned
    assert FilterSummary.__required_keys__ <= set(written) <= set(FilterSummary.__annotations__)
    assert set(written["split"]) == set(FilterSplit.__annotations__)
    official = set(written) & FilterSummary.__optional_keys__
    assert official == (FilterSummary.__optional_keys__ if protocol == "official" else set())
