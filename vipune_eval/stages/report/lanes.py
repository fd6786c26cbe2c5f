"""The lanes of vipune's own searches, as the report shows them: first in the headline and in
every table of retrievers (marked in the HTML), each set beside the reference retriever that
mirrors it or the binary's run it must rank exactly as, and the first one configured the retriever
every other is compared with. A new lane is one entry of ``LANES``."""

from __future__ import annotations

from dataclasses import dataclass

from vipune_eval.registry.vipune_runs import BINARY, LIB


@dataclass(frozen=True)
class Lane:
    retriever: str                # the retriever's name in the config and report.json
    agreement: str | None = None  # report.json's diagnostics key: its agreement with its reference mirror
    latency: str | None = None    # what its search latency includes, where the report shows it
    binary: str | None = None     # the binary's run it must rank exactly as (diagnostics.lanes)


LANES = (  # the run names are registry.vipune_runs'
    Lane(BINARY.hybrid, "vipune_vs_hybrid", latency="per query, subprocess included"),
    Lane(BINARY.semantic, "vipune_semantic_vs_dense"),
    # vipune's own search code through vipune-lane, on the cached query vectors (issue 37)
    Lane(LIB.hybrid, binary=BINARY.hybrid),
    Lane(LIB.semantic, binary=BINARY.semantic),
)
NAMES = frozenset(lane.retriever for lane in LANES)


def first(names: list[str]) -> list[str]:
    """``names`` with the lanes first, each group in its own order."""
    return sorted(names, key=lambda name: name not in NAMES)


def subject(names: list[str]) -> str:
    """The retriever the report compares every other with: the first lane configured, else the
    first retriever."""
    return next((lane.retriever for lane in LANES if lane.retriever in names), names[0])
