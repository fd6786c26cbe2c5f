"""The what-if lab's grid (issue 22): checked against the registry before any job runs, each
point a named family setting (the verdict: tests/unit/stages/report/test_whatif.py)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.imports import RECORDER, asked
from vipune_eval.errors import EvalError
from vipune_eval.plan import whatif_grid
from vipune_eval.registry import retrievers as registry
from vipune_eval.registry.measures import SEED, keys
from vipune_eval.registry.retrievers import Kind

KEYS = keys([1, 5, 10], SEED)
SPECS = registry.resolve(
    ["vipune", "dense", "hybrid", {"name": "h60", "use": "hybrid", "k": 60}, {"name": "mine", "use": "plug.py:rank"}]
)


def lab(grid, base="hybrid", **extra):
    return whatif_grid.resolve({"base": base, "grid": grid, **extra}, SPECS, KEYS)


def test_grid_points_are_named_family_settings_in_grid_order():
    got = lab({"query": ["and", "or"], "k": [10, 60]})
    assert [v.name for v in got.variants] == [
        "hybrid~k=10~query=and",
        "hybrid~k=60~query=and",
        "hybrid~k=10~query=or",
        "hybrid~k=60~query=or",
    ]
    assert got.variants[3].params == {"k": 60, "query": "or", "pool": None, "weights": [1.0, 1.0]}
    assert all(v.kind is Kind.ARMS and v.use == "hybrid" for v in got.variants)
    assert got.measure == "recall_any@5" and got.select_on == "dev" and got.confirm_on == "test"
    # a configured family setting as the base: its other parameters are kept
    assert lab({"query": ["or"]}, base="h60").variants[0].params["k"] == 60
    assert lab({"weights": [[1, 2]], "pool": [None]}).variants[0].name == "hybrid~pool=null~weights=1,2"


def test_a_grown_grid_keeps_the_earlier_names():
    small = {v.name: v.canonical() for v in lab({"k": [10, 25], "query": ["and"]}).variants}
    grown = {v.name: v.canonical() for v in lab({"query": ["and", "or"], "k": [10, 25, 60]}).variants}
    assert len(grown) == 6 and all(grown[name] == spec for name, spec in small.items())


@pytest.mark.parametrize(
    "block,words",
    [
        ({"base": "hybrid", "grid": {"kk": [1]}}, ["no parameter 'kk'", "k, query, pool, weights"]),
        ({"base": "hybrid", "grid": {"k": [0]}}, ["hybrid.k must be an integer in 1..1000000", "got 0"]),
        # issue 51 item 5: a what-if value has the family's highest value (2^64 overflowed fuse-reference)
        (
            {"base": "hybrid", "grid": {"k": [25, 2**64]}},
            ["hybrid.k must be an integer in 1..1000000", "got 18446744073709551616"],
        ),
        ({"base": "hybrid", "grid": {"weights": [[1, 1e300]]}}, ["hybrid.weights", "from 0 to 1000000"]),
        ({"base": "hybrid", "grid": {"query": ["nand"]}}, ["one of and | or", "'nand'"]),
        ({"base": "hybrid", "grid": {"k": [10, 10]}}, ["listed twice"]),
        ({"base": "hybrid", "grid": {"weights": [[1, 1], [float("inf"), 1]]}}, ["hybrid.weights", "finite"]),
        ({"base": "hybrid", "grid": {"k": []}}, ["non-empty list"]),
        ({"base": "hybrid", "grid": {"k": [10]}, "measure": "recall@7"}, ["recall@7", "recall_any@5"]),
        ({"base": "hybird", "grid": {"k": [10]}}, ["'hybird'", "hybrid-or", "h60"]),
        ({"base": "vipune", "grid": {"k": [10]}}, ["vipune binary", "mirror"]),
        ({"base": "mine", "grid": {"k": [10]}}, ["plugin"]),
        ({"base": "dense", "grid": {"k": [10]}}, ["family 'dense'", "its parameters: none"]),
    ],
)
def test_unknown_or_ill_typed_is_refused_listing_the_known(block, words):
    with pytest.raises(EvalError) as exc:
        whatif_grid.resolve(block, SPECS, KEYS)
    for word in words:
        assert word in str(exc.value)


def test_a_grid_of_more_than_500_points_is_refused_with_its_count():
    """Issue 32 item 7: a 10,000-point grid kept Snakemake building its DAG for minutes."""
    with pytest.raises(EvalError) as exc:
        lab({"k": list(range(1, 101)), "pool": list(range(10, 110))})
    assert "10000 points" in str(exc.value) and "500" in str(exc.value)
    assert len(lab({"k": list(range(1, 51)), "pool": list(range(10, 20))}).variants) == 500


def test_no_block_no_lab():
    assert whatif_grid.resolve(None, SPECS, KEYS) is None


def test_parsing_the_workflow_imports_no_statistics_and_no_arrays():
    """Every Snakemake start (each cluster job is one) imports what the rules import at their top:
    scipy, which the report's statistics need, cost each ~0.2 s when the grid took its split names
    from there; numpy and pyarrow (the plugin runner's and the vipune-lane's) ~0.2 s more."""
    rules = Path(__file__).parents[3] / "workflow" / "rules"
    imports = sorted(
        {
            line
            for smk in rules.glob("*.smk")
            for line in smk.read_text().splitlines()
            if re.match(r"from vipune_eval[\w.]* import \w", line)
        }
    )
    assert "from vipune_eval.plan import cluster, failures, manifest, planned_file, rundir" in imports
    heavy = ("scipy", "numpy", "pyarrow", "pandas")
    code = "\n".join([RECORDER, *imports, f"print({asked(heavy)})"])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
