"""Views: the ways of scoring the same pairs, protocol × granularity.

The seed protocol at session granularity is the primary result. Every other view is a full,
separate set of rows, runs and metrics under its own folder (``View.folder``):

- protocol ``seed``: rows are ``role: content`` text, gold is ``answer_session_ids`` (or the
  sessions holding a ``has_answer`` turn), trec_eval measures at the configured ``ks``;
- protocol ``official``: LongMemEval's own retrieval protocol (src/retrieval/run_retrieval.py and
  eval_utils.py at commit 9e0b455): rows hold the user turns' text only, gold is its
  ``answer``-id rule, cut-offs 1, 3, 5, 10, 30, 50, its ndcg_any beside trec_eval's nDCG.

Granularity ``session`` stores a session as one row; ``turn`` one row per turn; ``chunk``
consecutive turns packed into rows of at most 512 tokens. Rankings of turn and chunk rows
collapse to sessions by first occurrence (seed protocol) or by LongMemEval's turn→session rule
(official protocol).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vipune_eval.core.ranking_settings import RankingSettings
from vipune_eval.errors import EvalError
from vipune_eval.registry import granularities, measures

GRANULARITIES = granularities.NAMES
OFFICIAL_GRANULARITIES = granularities.OFFICIAL  # LongMemEval has no chunk keys
OFFICIAL_LIMIT = max(measures.OFFICIAL_KS)  # LongMemEval scores up to its largest cut-off
# What a row is at each granularity, in the report's words (a test holds its keys to the
# granularities).
ROWS = {
    "session": "one row per session",
    "turn": "one row per turn",
    "chunk": "rows of consecutive turns, at most 512 tokens each",
}


@dataclass(frozen=True)
class View:
    protocol: str
    granularity: str

    @property
    def folder(self) -> str:
        """The prefix of the view's results: "" for the seed protocol at session granularity (the
        primary results keep their paths), else ``<granularity>/``, ``official/`` or
        ``official-<granularity>/``."""
        primary = self.granularity == granularities.PRIMARY
        if self.protocol == "seed":
            return "" if primary else f"{self.granularity}/"
        return f"{self.protocol}/" if primary else f"{self.protocol}-{self.granularity}/"

    @property
    def name(self) -> str:
        return self.folder.rstrip("/") or granularities.PRIMARY

    @property
    def official(self) -> bool:
        return self.protocol == "official"

    @property
    def turn_level_run(self) -> bool:
        """The official turn view keeps its run at turn level (LongMemEval scores turn ids)."""
        return self.official and granularities.get(self.granularity).collapses

    @property
    def rank_all(self) -> bool:
        """Rows are parts of sessions: the single arms rank every row (rankings collapse)."""
        return granularities.get(self.granularity).collapses

    @property
    def needs_tokenizer(self) -> bool:
        return granularities.get(self.granularity).needs_tokenizer

    def measure_names(self) -> tuple[str, ...]:
        if self.turn_level_run:
            return measures.OFFICIAL_TURN
        return measures.OFFICIAL if self.official else measures.SEED

    def ks(self, config: dict[str, Any]) -> list[int]:
        return list(measures.OFFICIAL_KS) if self.official else list(config["ks"])

    def ranking_settings(self, config: dict[str, Any]) -> RankingSettings:
        """What every search in this view ranks to, the one place it is worked out from the config:
        vipune's ``--limit`` (and the limit its `hybrid` mirror fuses to: rows of a granularity that
        collapses are ranked to ``search.row_limit``), the documents kept per pair (sessions after
        turn and chunk rows collapse to sessions, or every row of a turn-level run), and whether
        rows collapse to their sessions."""
        sessions = OFFICIAL_LIMIT if self.official else config["search_limit"]
        rows = config["search"]["row_limit"]
        return RankingSettings(
            limit=rows if granularities.get(self.granularity).collapses else sessions,
            depth=rows if self.turn_level_run else sessions,
            collapse=not self.turn_level_run,
        )

    def description(self) -> str:
        rows = ROWS[self.granularity]
        if self.official:
            return (
                f"LongMemEval's own retrieval protocol (run_retrieval.py, eval_utils.py at "
                f"9e0b455), {rows}: rows hold user turns only; gold is LongMemEval's answer-id "
                f"rule; every non-abstention pair is searched: `metrics` average the pairs "
                f"run_retrieval.py keeps (it skips pairs without user-side evidence), "
                f"`metrics_all` every pair (print_retrieval_metrics.py)"
            )
        return f"the seed protocol, {rows} (role: content text), scored per session"


PRIMARY = View("seed", granularities.PRIMARY)


def configured(config: dict[str, Any]) -> list[View]:
    """The views a configuration asks for, the primary first."""
    asked = config["granularities"]
    wrong = granularities.problems(asked)
    if wrong:
        raise EvalError("; ".join(wrong))
    views = [View("seed", g) for g in GRANULARITIES if g in asked]
    if config["protocol"] == "official":
        views += [View("official", g) for g in OFFICIAL_GRANULARITIES if g in asked]
    return views
