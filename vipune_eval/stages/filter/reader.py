"""Reading LongMemEval: the JSON streamed one instance at a time (the real file is about 2.7 GB),
each instance checked field by field (an error names the instance and the field) and turned into
an ``Instance``: its pair (without rows) and its sessions with their dates.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import ijson

from vipune_eval.core.io import Progress, text_id
from vipune_eval.core.longmemeval import base_id, copy_id
from vipune_eval.errors import EvalError
from vipune_eval.registry.granularities import session_text

DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"
FALLBACK_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass
class Row:
    key: str
    session: str
    doc: str
    text: str


@dataclass
class Instance:
    """One validated instance: its pair (without rows) and its sessions."""

    pair: dict[str, Any]
    sessions: list[tuple[str, list[dict[str, Any]], str]]  # (session id, turns, created_at)
    where: str
    # Every listing of the haystack in order, repeats included (LongMemEval's corpus keeps a
    # session listed twice): (session id, turns, n-th listing of that id, created_at).
    listing: list[tuple[str, list[dict[str, Any]], int, str]] = field(default_factory=list)


_DATE = re.compile(r"(\d{4})/(\d\d)/(\d\d) \((?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\) (\d\d):(\d\d)")


def rfc3339(date: str) -> str:
    """'2023/05/20 (Sat) 02:21' → '2023-05-20T02:21:00Z' (a regex first: strptime was a quarter
    of the filter's time on the 2.7 GB file)."""
    match = _DATE.fullmatch(date) if isinstance(date, str) else None
    if match is None:
        return datetime.strptime(date, DATE_FORMAT).replace(tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    year, month, day, hour, minute = match.groups()
    datetime(int(year), int(month), int(day), int(hour), int(minute))  # rejects 2023/02/30
    return f"{year}-{month}-{day}T{hour}:{minute}:00Z"


BOM = b"\xef\xbb\xbf"  # UTF-8's byte order mark, which some editors write first


def iter_instances(path: Path) -> Iterator[dict[str, Any]]:
    done = 0
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
            bom = len(BOM) if head.startswith(BOM) else 0  # accepted, as JSON parsers may (RFC 8259 §8.1)
            if not head[bom:].lstrip(b" \t\r\n").startswith(b"["):
                raise EvalError(
                    f"{path}: LongMemEval data is one JSON list of instances, but the file starts with {head[:40]!r}"
                )
            handle.seek(bom)
            for item in ijson.items(handle, "item", use_float=True):
                yield item
                done += 1
    except (ijson.JSONError, UnicodeDecodeError) as exc:
        kind = "not UTF-8 text" if _is_encoding_error(exc) else "not a valid LongMemEval JSON array"
        raise EvalError(
            f"{path}: instance {done} (after {done} complete instances): {kind} ({_short(exc)})",
            fix="point dataset.path at the LongMemEval file, complete and undamaged (a copy "
            "cut short, or another format, fails here)",
        ) from exc


def _is_encoding_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return isinstance(exc, UnicodeDecodeError) or "utf8" in text or "utf-8" in text or "byte" in text


def _short(exc: Exception) -> str:
    """Parser messages can dump kilobytes of the input: keep the first line, briefly."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]


def _require(instance: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in instance:
        raise EvalError(f"{where}: required field {key!r} is missing")
    value = instance[key]
    if not isinstance(value, kind):
        raise EvalError(f"{where}: field {key!r} should be {kind.__name__}, got {type(value).__name__}")
    return value


def check_id(value: Any, what: str, where: str) -> str:
    """Ids go into whitespace-separated TREC files and vipune's arguments: non-empty strings
    without whitespace or control characters (a NUL cannot travel in an argument)."""
    if not isinstance(value, str) or not value or any(c.isspace() or ord(c) < 32 or c == "\x7f" for c in value):
        raise EvalError(
            f"{where}: {what} should be a non-empty string without whitespace or "
            f"control characters (TREC files are whitespace-separated), got {value!r:.80}"
        )
    return value


def _check_session(session: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(session, list):
        raise EvalError(f"{where}: a session should be a list of turns, got {type(session).__name__}")
    for turn in session:
        if not (isinstance(turn, dict) and isinstance(turn.get("role"), str) and isinstance(turn.get("content"), str)):
            raise EvalError(f"{where}: every turn needs string 'role' and 'content', got {turn!r:.120}")
    return session


def read_instance(instance: Any, where: str) -> Instance:
    """Validate one non-abstention instance; its pair under the seed protocol and its sessions."""
    qid = instance["question_id"]
    where = f"{where} (question_id {qid})"
    # A NUL cannot travel in a command-line argument, so no lane sees it (the rest is kept as data).
    question = _require(instance, "question", str, where).replace("\x00", " ").strip()
    qtype = _require(instance, "question_type", str, where)
    session_ids = _require(instance, "haystack_session_ids", list, where)
    sessions = _require(instance, "haystack_sessions", list, where)
    dates = instance.get("haystack_dates")
    if len(session_ids) != len(sessions):
        raise EvalError(f"{where}: {len(session_ids)} haystack_session_ids but {len(sessions)} haystack_sessions")
    if not sessions:
        raise EvalError(f"{where}: empty haystack")
    if not question:
        raise EvalError(f"{where}: empty question")
    if dates is not None and not isinstance(dates, list):
        raise EvalError(
            f"{where}: field 'haystack_dates' should be a list of dates like "
            f"'2023/05/20 (Sat) 02:21', got {type(dates).__name__} {dates!r:.60}"
        )
    if dates is not None and len(dates) != len(sessions):
        raise EvalError(f"{where}: {len(dates)} haystack_dates for {len(sessions)} sessions")

    seen: dict[str, str] = {}
    listed: Counter = Counter()
    listing: list[tuple[str, list[dict[str, Any]], int, str]] = []  # (id, turns, n-th listing, created_at)
    for i, (sid, session) in enumerate(zip(session_ids, sessions)):
        check_id(sid, f"haystack_session_ids[{i}]", where)
        if base_id(sid) != sid:
            raise EvalError(
                f"{where}: haystack_session_ids[{i}] = {sid!r} ends like the ids the harness "
                "gives a session listed twice (#copyN); rename it"
            )
        session = _check_session(session, f"{where}, session {sid}")
        tid = text_id(session_text(session))
        if seen.setdefault(sid, tid) != tid:
            raise EvalError(f"{where}: session id {sid} appears twice with different content")
        stamp = None
        if dates is not None:
            try:
                stamp = rfc3339(dates[i])
            except (TypeError, ValueError) as exc:
                raise EvalError(
                    f"{where}: haystack_dates[{i}] = {dates[i]!r} is not like '2023/05/20 (Sat) 02:21'"
                ) from exc
        stamp = stamp or (FALLBACK_EPOCH + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        listed[sid] += 1
        listing.append((sid, session, listed[sid], stamp))
    # The seed protocol stores a session listed twice once; the official view keeps every listing.
    kept = [(sid, session, stamp) for sid, session, n, stamp in listing if n == 1]
    with_answer = [sid for sid, session, _ in kept if any(turn.get("has_answer") is True for turn in session)]

    gold = instance.get("answer_session_ids")
    if gold:
        if not (isinstance(gold, list) and all(isinstance(g, str) for g in gold)):
            raise EvalError(f"{where}: answer_session_ids should be a list of strings, got {gold!r:.120}")
        gold, source = list(dict.fromkeys(gold)), "answer_session_ids"
    else:
        gold, source = with_answer, "has_answer"
    if not gold:
        raise EvalError(f"{where}: no gold session (answer_session_ids is empty and no turn has has_answer)")
    missing = [g for g in gold if g not in seen]
    if missing:
        # Stop rather than drop: a gold session that cannot be retrieved would quietly lower recall.
        raise EvalError(f"{where}: gold session(s) {missing} are not in the haystack")
    pair = {
        "question_id": qid,
        "question_type": qtype,
        "question": question,
        "question_date": str(instance.get("question_date", "")),
        "gold": gold,
        "gold_source": source,
        "session_ids": [sid for sid, _, _ in kept],
    }
    return Instance(pair, kept, where, listing)


# ---------------------------------------------------------------- rows of each view


def has_user_side_evidence(instance: Instance) -> bool:
    """run_retrieval.py's skip rule: some user turn of the haystack has a truthy has_answer."""
    return any(bool(t.get("has_answer")) for _, session, _ in instance.sessions for t in session if t["role"] == "user")


def created_at_of(instance: Instance) -> dict[str, str]:
    """Each row session's created_at (a repeated listing's own date under its copy key)."""
    return {sid + ("" if n == 1 else copy_id("", n)): stamp for sid, _, n, stamp in instance.listing}


# ---------------------------------------------------------------- chunks


# ---------------------------------------------------------------- the two stages


def usable_instances(dataset: Path, counts: Counter, expected_instances: int | None) -> Iterator[Instance]:
    """Validated non-abstention instances, counting instances and abstention ones."""
    seen: set[str] = set()
    progress = Progress("filter: instances", total=expected_instances or 0)
    for index, raw in enumerate(iter_instances(dataset)):
        where = f"{dataset}: instance {index}"
        if not isinstance(raw, dict):
            raise EvalError(f"{where}: should be an object, got {type(raw).__name__}")
        counts["instances"] += 1
        progress.advance()
        qid = check_id(_require(raw, "question_id", str, where), "question_id", where)
        if qid in seen:
            raise EvalError(f"{where}: duplicate question_id {qid}")
        seen.add(qid)
        if "_abs" in qid:  # LongMemEval's own test (run_retrieval.py, evaluate_qa.py)
            counts["abstention"] += 1
            continue
        yield read_instance(raw, where)
    if counts["instances"] == 0:
        raise EvalError(f"{dataset}: the JSON array holds no instances")
