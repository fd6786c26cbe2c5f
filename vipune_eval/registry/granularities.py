"""Granularities: what each one makes of a session (one owner of the names and their meaning).

A granularity says which memory rows a session becomes (their keys and texts, seed protocol),
whether its rankings collapse to sessions (rows that are parts of sessions: the single arms then
rank every row and vipune searches to ``search.row_limit``), whether its rows are cut by the
model's tokenizer, and whether LongMemEval's own protocol has keys for it. Views, the filter,
the rules, plots and report ask this module; none of them types a granularity's name but the
report's words for its rows (registry.views.ROWS: every stage reaches this module, so its
wording lives where only the report reads it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vipune_eval.errors import EvalError

Turn = dict[str, Any]
Chunker = Callable[[list[str]], list[str]]


def turn_text(turn: Turn) -> str:
    return f"{turn['role']}: {turn['content']}"


def session_text(session: list[Turn]) -> str:
    """One memory row per session: the turns as ``role: content`` lines."""
    return "\n".join(turn_text(turn) for turn in session)


@dataclass(frozen=True)
class Granularity:
    name: str
    seed_rows: Callable[[str, list[Turn], Chunker | None], list[tuple[str, str]]]  # (key, text)
    collapses: bool = True  # a row is part of a session: rankings collapse by first occurrence
    needs_tokenizer: bool = False
    official: bool = False  # LongMemEval's protocol has keys at this granularity


def _chunk_rows(sid: str, session: list[Turn], chunker: Chunker | None) -> list[tuple[str, str]]:
    if chunker is None:  # the filter makes one wherever needs_tokenizer says so
        raise EvalError("the chunk granularity cuts rows with the model's tokenizer, and none was given")
    return [(f"{sid}::c{n}", text) for n, text in enumerate(chunker([turn_text(t) for t in session]), 1)]


GRANULARITIES: dict[str, Granularity] = {
    g.name: g
    for g in (
        Granularity(
            "session", lambda sid, session, chunker: [(sid, session_text(session))], collapses=False, official=True
        ),
        Granularity(
            "turn",
            lambda sid, session, chunker: [(f"{sid}::{n}", turn_text(t)) for n, t in enumerate(session, 1)],
            official=True,
        ),
        Granularity("chunk", _chunk_rows, needs_tokenizer=True),
    )
}
NAMES = tuple(GRANULARITIES)
PRIMARY = "session"  # always present; its results are the primary ones
OFFICIAL = tuple(name for name, g in GRANULARITIES.items() if g.official)


def problems(asked: list[str]) -> list[str]:
    """What is wrong with a ``granularities`` list: unknown names, or no primary."""
    out = [
        f"unknown granularity {name!r} (granularities: {', '.join(NAMES)})"
        for name in asked
        if name not in GRANULARITIES
    ]
    if PRIMARY not in asked:
        out.append(
            f"granularities {list(asked)} has no {PRIMARY}: {PRIMARY} is required (the primary "
            f"result, the one the others are compared with); use {[PRIMARY, *asked]}"
        )
    return out


def get(name: str) -> Granularity:
    if name not in GRANULARITIES:
        raise EvalError(f"unknown granularity {name!r} (granularities: {', '.join(NAMES)})")
    return GRANULARITIES[name]
