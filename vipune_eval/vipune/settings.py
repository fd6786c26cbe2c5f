"""How a job runs one vipune build, in both lanes: the settings object the CLI builds from the
options every vipune command shares (the binary's search, its preflight, vipune-lane's search).
No imports of the client: an edit of how the binary is called reruns nothing of the lib lane."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class VipuneSettings:
    """How a job calls one vipune build: built by the CLI from the options every vipune command
    shares."""

    binary: str  # as configured: a name on PATH or a path ("" for a build not configured now)
    fingerprint: Path  # the fingerprint file the binary's bytes must match
    hf_home: Path | None  # the hf-hub cache holding the model where vipune looks for it (None: the lib lane)
    tmp: Path  # the job's scratch folder (private HOME, throwaway databases)
    timeout: float  # seconds per call

    def search_flags(self, limit: int, hybrid: bool) -> list[str]:
        """Every option of the harness's ``vipune search`` but the database, project and query:
        with the rows and the question, all a search's answer depends on. The command line
        (``Vipune.search``), the resumed shard's cache key (stages.search.vipune.persona_key) and
        the lib lane (``query_flags``) all take these."""
        return ["--hybrid" if hybrid else "--no-hybrid", *self.query_flags(limit)]

    def query_flags(self, limit: int) -> list[str]:
        """The search's options but its kind (hybrid or not): what vipune-lane is given, to search
        both ways as the binary is told to. A configurable flag is a field of these settings read
        here."""
        return ["--recency", "0", "--limit", str(limit), "--no-touch"]
