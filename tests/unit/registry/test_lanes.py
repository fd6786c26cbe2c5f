"""The run names of vipune's own code: one table (registry.lanes), read by the presets, the
searches that write the runs, the plan, the report and the summary (issue 36)."""

import re

from support.scenarios import REPO
from vipune_eval.registry import lanes, retrievers

PACKAGE = REPO / "vipune_eval"


def test_the_presets_are_the_tables_runs():
    for runs, kind in ((lanes.BINARY, retrievers.Kind.VIPUNE), (lanes.LIB, retrievers.Kind.LIB)):
        for search in lanes.SEARCHES:
            spec = retrievers.spec(runs.of(search))
            assert spec.kind is kind and spec.mirror["use"] == ("hybrid" if search == "hybrid" else "dense")


def test_no_other_module_types_a_run_name():
    names = [lanes.BINARY.semantic, lanes.LIB.hybrid, lanes.LIB.semantic]
    typed = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for folder in ("stages", "plan", "registry")
        for path in (PACKAGE / folder).rglob("*.py")
        if path.name != "lanes.py"
        for name in names
        if re.search(rf"[\"']{name}[\"']", path.read_text())
    ]
    assert not typed, typed


def test_the_lanes_runs_come_first_each_group_in_its_own_order():
    LIB, BINARY = lanes.LIB, lanes.BINARY
    assert lanes.first(["dense", LIB.hybrid, "hybrid", BINARY.hybrid]) == [LIB.hybrid, BINARY.hybrid, "dense", "hybrid"]


def test_the_retriever_compared_with_every_other_is_the_first_lane_run_configured_else_the_first():
    LIB, BINARY = lanes.LIB, lanes.BINARY
    assert lanes.subject(["dense", LIB.hybrid, BINARY.hybrid]) == BINARY.hybrid  # LANES' order: the binary's first
    assert lanes.subject(["dense", LIB.semantic]) == LIB.semantic
    assert lanes.subject(["dense", "hybrid"]) == "dense"


def test_each_lib_run_is_set_against_the_binarys_run_of_the_same_search():
    LIB, BINARY = lanes.LIB, lanes.BINARY
    assert LIB.counterparts() == {LIB.hybrid: BINARY.hybrid, LIB.semantic: BINARY.semantic}
    assert BINARY.counterparts() == {} and LIB.agreement_keys() == {}
    assert BINARY.agreement_keys() == {BINARY.hybrid: "vipune_vs_hybrid", BINARY.semantic: "vipune_semantic_vs_dense"}
    assert set(lanes.RUNS) == {BINARY.hybrid, BINARY.semantic, LIB.hybrid, LIB.semantic}
