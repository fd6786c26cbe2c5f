"""What a view's searches rank to, as one typed value from the config to the report: vipune's
``--limit`` (and the limit its mirrors fuse to), the documents a run keeps per pair, and whether a
ranking of rows collapses to their documents. registry.views.View.ranking_settings builds it once
from the config; every search and score command gets it (cli.py's "ranking" options, the text
``options`` writes), and what they write records it (a search's ``searched``, a run's
``scored_with``), which report.json's views state. No imports: an edit elsewhere reruns nothing
that reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict


@dataclass(frozen=True)
class RankingSettings:
    limit: int  # vipune's --limit, and the limit its mirrors fuse to
    depth: int  # documents kept per pair in a run
    collapse: bool = True  # rows' rankings collapse to their documents (not a turn-level run)

    def options(self) -> list[str]:
        """The command line a rule passes (cli.py's "ranking" options read it back as these settings)."""
        return ["--limit", str(self.limit), "--depth", str(self.depth), *([] if self.collapse else ["--no-collapse"])]

    def record(self) -> RankingRecord:
        """As the files record it (``dataclasses.asdict``'s keys and order)."""
        return {"limit": self.limit, "depth": self.depth, "collapse": self.collapse}


class RankingRecord(TypedDict):
    """RankingSettings as the files record it (``dataclasses.asdict``): a search's status file, a
    run's metrics, the report's manifest and report.json's views."""

    limit: int
    depth: int
    collapse: bool
