"""vipune's lanes (docs/glossary.md): the two ways of running vipune's own code, the binary and
vipune-lane (the lib lane), each making two runs per persona, its hybrid and its semantic search;
and what the report sets each lane's runs against: the binary's against their reference mirrors,
the lib lane's against the binary's. The presets, the searches that write the runs, the plan and
the report read the names here. No imports: an edit elsewhere in the registry reruns nothing that
reads these."""

from __future__ import annotations

from dataclasses import dataclass

SEARCHES = ("hybrid", "semantic")  # the two searches of each lane, in this order


@dataclass(frozen=True)
class Lane:
    """One lane: the run names of its two searches, and what the report sets them against."""

    hybrid: str  # its hybrid search (dense and bm25 fused)
    semantic: str  # its dense search alone
    # report.json's diagnostics keys of its runs' agreement with their reference mirrors (SEARCHES' order)
    agreement: tuple[str, str] | None = None
    latency: str | None = None  # what its hybrid search's latency includes, where the report shows it
    ranks_as: Lane | None = None  # the vipune-lane whose runs it must rank exactly as (report.json's diagnostics.lanes)

    def of(self, search: str) -> str:
        """The run of ``search`` (one of SEARCHES)."""
        return {"hybrid": self.hybrid, "semantic": self.semantic}[search]

    @property
    def runs(self) -> tuple[str, str]:
        """Its runs, in SEARCHES' order."""
        return (self.hybrid, self.semantic)

    def agreement_keys(self) -> dict[str, str]:
        """Each of its runs checked against its reference mirror → the diagnostics key of their agreement."""
        return dict(zip(self.runs, self.agreement or ()))

    def counterparts(self) -> dict[str, str]:
        """Each of its runs → the run of the same search it must rank exactly as (``ranks_as``'s)."""
        return dict(zip(self.runs, self.ranks_as.runs)) if self.ranks_as else {}


BINARY = Lane(
    "vipune",
    "vipune-semantic",  # the vipune binary: search --hybrid / --no-hybrid
    agreement=("vipune_vs_hybrid", "vipune_semantic_vs_dense"),
    latency="per query, subprocess included",
)
LIB = Lane("vipune-lib", "vipune-lib-semantic", ranks_as=BINARY)  # vipune-lane, beside the binary (issue 37)
LANES = (BINARY, LIB)  # the report's order: first in the headline and in every table of retrievers
RUNS = tuple(run for lane in LANES for run in lane.runs)  # every run of vipune's own code, in that order


def first(names: list[str]) -> list[str]:
    """``names`` with the lanes' runs first, each group in its own order."""
    return sorted(names, key=lambda name: name not in RUNS)


def subject(names: list[str]) -> str:
    """The retriever the report compares every other with: the first lane's run configured (RUNS'
    order), else the first retriever."""
    return next((run for run in RUNS if run in names), names[0])
