"""The runs of vipune's own code, by name: each way of running it (the binary; vipune-lane, the
lib lane) makes two runs per persona, its hybrid and its semantic search. The presets, the
searches that write them, the report and the summary read the names here. No imports: an edit
elsewhere in the registry reruns nothing that reads these.
"""

from __future__ import annotations

from dataclasses import dataclass

SEARCHES = ("hybrid", "semantic")  # the two searches of each way, in this order


@dataclass(frozen=True)
class Runs:
    """The run names of one way of running vipune's code."""

    hybrid: str    # its hybrid search (dense and bm25 fused)
    semantic: str  # its dense search alone

    def of(self, search: str) -> str:
        """The run of ``search`` (one of SEARCHES)."""
        return {"hybrid": self.hybrid, "semantic": self.semantic}[search]


BINARY = Runs("vipune", "vipune-semantic")  # the vipune binary: search --hybrid / --no-hybrid
LIB = Runs("vipune-lib", "vipune-lib-semantic")  # vipune-lane, beside the binary
