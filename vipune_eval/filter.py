"""filter: stream LongMemEval's JSON into scored pairs, unique texts and qrels.

The real file is about 2.7 GB, so instances are parsed one at a time (ijson) and texts are
written to Parquet in batches; only the set of seen text ids and the pairs stay in memory.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import ijson
import pyarrow as pa
import pyarrow.parquet as pq

from .io import EvalError, Progress, atomic_path, log, text_id, write_json

PAIRS_SCHEMA = pa.schema([
    ("question_id", pa.string()),
    ("question_type", pa.string()),
    ("question", pa.string()),
    ("question_date", pa.string()),
    ("question_text_id", pa.string()),
    ("gold", pa.list_(pa.string())),
    ("gold_source", pa.string()),
    ("session_ids", pa.list_(pa.string())),
    ("session_text_ids", pa.list_(pa.string())),
    ("session_created_at", pa.list_(pa.string())),
])
TEXTS_SCHEMA = pa.schema([("text_id", pa.string()), ("text", pa.string())])
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"
FALLBACK_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class FilterOutputs:
    pairs: Path
    texts: Path
    qrels: Path
    summary: Path
    official_pairs: Path | None = None  # LongMemEval's own protocol, when asked for
    official_qrels: Path | None = None


def session_text(session: list[dict[str, Any]]) -> str:
    """One memory row per session: the turns as ``role: content`` lines."""
    return "\n".join(f"{turn['role']}: {turn['content']}" for turn in session)


_DATE = re.compile(r"(\d{4})/(\d\d)/(\d\d) \((?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\) (\d\d):(\d\d)")


def rfc3339(date: str) -> str:
    """'2023/05/20 (Sat) 02:21' → '2023-05-20T02:21:00Z' (a regex first: strptime was a quarter
    of the filter's time on the 2.7 GB file)."""
    match = _DATE.fullmatch(date) if isinstance(date, str) else None
    if match is None:
        return datetime.strptime(date, DATE_FORMAT).replace(tzinfo=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    year, month, day, hour, minute = match.groups()
    datetime(int(year), int(month), int(day), int(hour), int(minute))  # rejects 2023/02/30
    return f"{year}-{month}-{day}T{hour}:{minute}:00Z"


def iter_instances(path: Path) -> Iterator[dict[str, Any]]:
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
            if not head.startswith(b"["):
                raise EvalError(f"{path}: LongMemEval data is one JSON list of instances, but the "
                                f"file starts with {head[:40]!r}")
            handle.seek(0)
            yield from ijson.items(handle, "item", use_float=True)
    except ijson.JSONError as exc:
        raise EvalError(f"{path}: not a valid LongMemEval JSON array ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise EvalError(f"{path}: not UTF-8 text ({exc})") from exc


def _require(instance: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in instance:
        raise EvalError(f"{where}: required field {key!r} is missing")
    value = instance[key]
    if not isinstance(value, kind):
        raise EvalError(f"{where}: field {key!r} should be {kind.__name__}, got {type(value).__name__}")
    return value


def _check_id(value: Any, what: str, where: str) -> str:
    """Ids go into whitespace-separated TREC files and vipune row ids: strings without spaces."""
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        raise EvalError(f"{where}: {what} should be a non-empty string without whitespace, got {value!r:.80}")
    return value


def _check_session(session: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(session, list):
        raise EvalError(f"{where}: a session should be a list of turns, got {type(session).__name__}")
    for turn in session:
        if not (isinstance(turn, dict) and isinstance(turn.get("role"), str)
                and isinstance(turn.get("content"), str)):
            raise EvalError(f"{where}: every turn needs string 'role' and 'content', got {turn!r:.120}")
    return session


def build_pair(instance: dict[str, Any], where: str,
               official: bool = False) -> tuple[dict[str, Any], dict[str, str], dict[str, Any] | None]:
    """One scored pair, the texts (id → text) its haystack and question need, and with
    ``official`` the pair under LongMemEval's own protocol (None when it keeps no gold)."""
    qid = _require(instance, "question_id", str, where)
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
    if dates is not None and len(dates) != len(sessions):
        raise EvalError(f"{where}: {len(dates)} haystack_dates for {len(sessions)} sessions")

    texts: dict[str, str] = {}
    ids: list[str] = []
    text_ids: list[str] = []
    created: list[str] = []
    seen: dict[str, str] = {}
    with_answer: list[str] = []
    user_text: dict[str, str] = {}   # official protocol: the user turns of each session
    user_answer: set[str] = set()    # … and the sessions with a user-side has_answer turn
    for i, (sid, session) in enumerate(zip(session_ids, sessions)):
        _check_id(sid, f"haystack_session_ids[{i}]", where)
        text = session_text(_check_session(session, f"{where}, session {sid}"))
        tid = text_id(text)
        if sid in seen:
            if seen[sid] != tid:
                raise EvalError(f"{where}: session id {sid} appears twice with different content")
            continue  # the same session listed twice: one memory row
        seen[sid] = tid
        texts[tid] = text
        ids.append(sid)
        text_ids.append(tid)
        try:
            stamp = rfc3339(dates[i]) if dates is not None else None
        except (TypeError, ValueError) as exc:
            raise EvalError(f"{where}: haystack_dates[{i}] = {dates[i]!r} is not like "
                            f"'2023/05/20 (Sat) 02:21'") from exc
        created.append(stamp or (FALLBACK_EPOCH + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ"))
        if any(turn.get("has_answer") is True for turn in session):
            with_answer.append(sid)
        if official:
            user_turns = [t for t in session if t["role"] == "user"]
            if user_turns:
                user_text[sid] = session_text(user_turns)
            if any(t.get("has_answer") is True for t in user_turns):
                user_answer.add(sid)

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

    qtid = text_id(question)
    texts[qtid] = question
    pair = {"question_id": qid, "question_type": qtype, "question": question,
            "question_date": str(instance.get("question_date", "")), "question_text_id": qtid,
            "gold": gold, "gold_source": source, "session_ids": ids, "session_text_ids": text_ids,
            "session_created_at": created}
    return pair, texts, (official_pair(pair, user_text, user_answer, texts) if official else None)


def official_pair(pair: dict[str, Any], user_text: dict[str, str], user_answer: set[str],
                  texts: dict[str, str]) -> dict[str, Any] | None:
    """LongMemEval's retrieval protocol: rows hold user turns only, and gold keeps only the answer
    sessions with a user-side has_answer turn; a pair left without gold is skipped."""
    gold = [g for g in pair["gold"] if g in user_answer and g in user_text]
    if not gold:
        return None
    kept = [i for i, sid in enumerate(pair["session_ids"]) if sid in user_text]
    text_ids = []
    for i in kept:
        tid = text_id(user_text[pair["session_ids"][i]])
        texts[tid] = user_text[pair["session_ids"][i]]
        text_ids.append(tid)
    return {**pair, "gold": gold, "gold_source": "official: user-side has_answer",
            "session_ids": [pair["session_ids"][i] for i in kept], "session_text_ids": text_ids,
            "session_created_at": [pair["session_created_at"][i] for i in kept]}


def run_filter(dataset: Path, out: FilterOutputs, expected: dict[str, int] | None,
               batch_texts: int = 2000) -> dict[str, Any]:
    pairs: list[dict[str, Any]] = []
    official: list[dict[str, Any]] = []
    with_official = out.official_pairs is not None
    seen_texts: set[str] = set()
    seen_questions: set[str] = set()
    batch: list[tuple[str, str]] = []
    counts = Counter()
    per_category: Counter[str] = Counter()
    gold_sources: Counter[str] = Counter()
    progress = Progress("filter: instances", total=expected["instances"] if expected else 0)
    with atomic_path(out.texts) as tmp_texts:
        writer = pq.ParquetWriter(tmp_texts, TEXTS_SCHEMA)

        def flush() -> None:
            if batch:
                writer.write_table(pa.Table.from_pylist(
                    [{"text_id": t, "text": x} for t, x in batch], schema=TEXTS_SCHEMA))
                batch.clear()

        for index, instance in enumerate(iter_instances(dataset)):
            where = f"{dataset}: instance {index}"
            if not isinstance(instance, dict):
                raise EvalError(f"{where}: should be an object, got {type(instance).__name__}")
            counts["instances"] += 1
            progress.advance()
            qid = _check_id(_require(instance, "question_id", str, where), "question_id", where)
            if qid in seen_questions:
                raise EvalError(f"{where}: duplicate question_id {qid}")
            seen_questions.add(qid)
            if qid.endswith("_abs"):
                counts["abstention"] += 1
                continue
            pair, texts, official_version = build_pair(instance, where, with_official)
            pairs.append(pair)
            if official_version:
                official.append(official_version)
            per_category[pair["question_type"]] += 1
            gold_sources[pair["gold_source"]] += 1
            counts["session_slots"] += len(pair["session_ids"])
            for tid, text in texts.items():
                if tid not in seen_texts:
                    seen_texts.add(tid)
                    batch.append((tid, text))
            if len(batch) >= batch_texts:
                flush()
        flush()
        writer.close()
        if counts["instances"] == 0:
            raise EvalError(f"{dataset}: the JSON array holds no instances")
        summary = {
            "instances": counts["instances"], "abstention": counts["abstention"], "pairs": len(pairs),
            "per_category": dict(sorted(per_category.items())), "gold_source": dict(gold_sources),
            "session_slots": counts["session_slots"], "unique_texts": len(seen_texts),
            "created_at_policy": "haystack_dates of the session (UTC); 2000-01-01 + index minutes when absent",
        }
        if with_official:
            summary["official"] = {
                "pairs": len(official), "skipped_without_user_side_gold": len(pairs) - len(official),
                "per_category": dict(sorted(Counter(p["question_type"] for p in official).items()))}
        check_expected(dataset, summary, expected)
        write_pairs(out.pairs, pairs)
        write_qrels(out.qrels, pairs)
        if with_official:
            write_pairs(out.official_pairs, official)
            write_qrels(out.official_qrels, official)
        write_json(out.summary, summary)
    log.info("filter: %d instances, %d abstention, %d pairs, %d unique texts", summary["instances"],
             summary["abstention"], summary["pairs"], summary["unique_texts"])
    return summary


def check_expected(dataset: Path, summary: dict[str, Any], expected: dict[str, int] | None) -> None:
    if summary["pairs"] == 0:
        raise EvalError(f"{dataset}: zero usable pairs ({summary['instances']} instances, "
                        f"{summary['abstention']} abstention)")
    if expected is None:
        return
    wrong = {k: (v, summary[k]) for k, v in expected.items() if summary[k] != v}
    if wrong:
        detail = ", ".join(f"{k}: expected {want}, found {got}" for k, (want, got) in wrong.items())
        raise EvalError(f"{dataset}: counts differ from dataset.expected ({detail}); per category: "
                        f"{summary['per_category']}. Wrong file? Set dataset.expected to null to skip the check.")


def write_pairs(path: Path, pairs: list[dict[str, Any]]) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_pylist(pairs, schema=PAIRS_SCHEMA), tmp)


def write_qrels(path: Path, pairs: list[dict[str, Any]]) -> None:
    lines = [f"{p['question_id']} 0 {g} 1\n" for p in pairs for g in p["gold"]]
    with atomic_path(path) as tmp:
        tmp.write_text("".join(lines), encoding="utf-8")


def read_pairs(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()
