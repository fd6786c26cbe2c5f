"""stages/report/lanes.py: vipune's lanes as the report shows them."""

from __future__ import annotations

from vipune_eval.registry.vipune_runs import BINARY, LIB
from vipune_eval.stages.report import lanes


def test_the_lanes_come_first_each_group_in_its_own_order():
    assert lanes.first(["dense", LIB.hybrid, "hybrid", BINARY.hybrid]) == [LIB.hybrid, BINARY.hybrid, "dense", "hybrid"]


def test_the_retriever_compared_with_every_other_is_the_first_lane_configured_else_the_first():
    assert lanes.subject(["dense", LIB.hybrid, BINARY.hybrid]) == BINARY.hybrid  # LANES' order: the binary's first
    assert lanes.subject(["dense", LIB.semantic]) == LIB.semantic
    assert lanes.subject(["dense", "hybrid"]) == "dense"


def test_each_lib_lane_is_set_against_the_binarys_run_it_must_rank_as():
    against = {lane.retriever: lane.binary for lane in lanes.LANES if lane.binary}
    assert against == {LIB.hybrid: BINARY.hybrid, LIB.semantic: BINARY.semantic}
    assert lanes.NAMES == {BINARY.hybrid, BINARY.semantic, LIB.hybrid, LIB.semantic}
