"""LongMemEval's own protocol: its corpus keys and ids (src/retrieval/run_retrieval.py, commit 9e0b455)."""

from __future__ import annotations

from typing import Any

from vipune_eval.core.longmemeval import base_id, copy_id
from vipune_eval.errors import EvalError
from vipune_eval.registry import granularities
from vipune_eval.stages.filter.reader import Instance, Row


def official_session_text(session: list[dict[str, Any]]) -> str:
    """LongMemEval's session key: the user turns' contents joined by one space."""
    return " ".join(turn["content"] for turn in session if turn["role"] == "user")


def _has_answer(turn: dict[str, Any], where: str, session: str, strict: bool) -> bool:
    """LongMemEval's reading of ``has_answer`` on a user turn of an ``answer`` session: truthy
    at session level (a missing key raises KeyError there), exactly true/false at turn level."""
    if "has_answer" not in turn:
        raise EvalError(
            f"{where}, session {session}: a user turn has no has_answer; LongMemEval's "
            f"run_retrieval.py fails on it (KeyError), so the official view cannot be scored"
        )
    if strict and turn["has_answer"] not in [True, False]:  # its assert: so 1 and 0 pass
        raise EvalError(
            f"{where}, session {session}: has_answer = {turn['has_answer']!r}; LongMemEval's "
            "turn-level code asserts true or false, so the official turn view cannot be scored"
        )
    return bool(turn["has_answer"])


def official_rows(instance: Instance, granularity: str) -> list[Row]:
    """LongMemEval's corpus (run_retrieval.py, process_item_flat_index): a session's key is its
    user turns joined by a space (kept even when empty); a turn's id is ``<session>_<n>`` with n
    counting turns of both roles from 1; ``answer`` in an id becomes ``noans`` where no user-side
    has_answer marks the evidence."""
    rows = []
    for sid, session, n_listing, _ in instance.listing:
        mark = "" if n_listing == 1 else copy_id("", n_listing)
        session_key = sid + mark  # the created_at lookup of this listing
        users = [(n, t) for n, t in enumerate(session, 1) if t["role"] == "user"]
        if not granularities.get(granularity).collapses:  # LongMemEval's session keys
            doc = sid
            # every user turn is read (its list comprehension raises on any missing key)
            if "answer" in sid and not any([_has_answer(t, instance.where, sid, False) for _, t in users]):
                doc = sid.replace("answer", "noans")
            rows.append(Row(doc + mark, session_key, doc + mark, official_session_text(session)))
            continue
        for n, turn in users:
            doc = f"{sid}_{n}"
            if "answer" in sid and not _has_answer(turn, instance.where, sid, True):
                doc = doc.replace("answer", "noans")
            rows.append(Row(doc + mark, session_key, doc + mark, turn["content"]))
    for row in rows:
        if row.doc != base_id(row.doc) and "answer" in row.doc:
            raise EvalError(
                f"{instance.where}: evidence session {base_id(row.session)} is listed twice; "
                "LongMemEval counts both copies under one correct id, which a run file cannot "
                "hold, so the official view cannot score this pair"
            )
    return rows
