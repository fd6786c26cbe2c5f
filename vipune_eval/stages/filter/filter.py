"""filter: stream LongMemEval's JSON into the pairs of a view, their memory rows and qrels.

The real file is about 2.7 GB, so instances are parsed one at a time (ijson) and rows, texts
and pairs are written to Parquet in batches; only the set of seen text ids stays in memory.

Two stages read the dataset, so that what the searches need does not change when only the
pairs' labels do: ``run_rows`` writes each pair's memory rows and the unique texts (what embed
and search read); ``run_pairs`` writes the pairs (category, gold, dev/test split), the qrels and
the counts (what score and report read).
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import chain
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import ijson
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from vipune_eval.registry import granularities
from vipune_eval.stages.filter import split as splits
from vipune_eval.core import trec
from vipune_eval.core.io import EvalError, Progress, atomic_path, log, text_id, write_json
from vipune_eval.core.longmemeval import base_id, copy_id

PAIRS_SCHEMA = pa.schema([
    ("question_id", pa.string()),
    ("question_type", pa.string()),
    ("question", pa.string()),
    ("question_date", pa.string()),
    ("split", pa.string()),
    ("gold", pa.list_(pa.string())),
    ("gold_source", pa.string()),
    ("session_ids", pa.list_(pa.string())),
    # run_retrieval.py's skip rule keeps the pair (some user turn has a truthy has_answer): the
    # official view's `metrics` average these, its `metrics_all` every pair
    ("user_side_evidence", pa.bool_()),
])
ROWS_SCHEMA = pa.schema([
    ("question_id", pa.string()),
    ("question", pa.string()),
    ("question_text_id", pa.string()),
    ("row_keys", pa.list_(pa.string())),      # unique within the pair: the vipune row id's tail
    ("row_sessions", pa.list_(pa.string())),  # the session each row belongs to
    ("row_docs", pa.list_(pa.string())),      # the document a row stands for in the run file
    ("row_text_ids", pa.list_(pa.string())),
    ("row_created_at", pa.list_(pa.string())),
])
TEXTS_SCHEMA = pa.schema([("text_id", pa.string()), ("text", pa.string())])
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"
FALLBACK_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)
MAX_ROW_TOKENS = 512  # what vipune's add/search accept (special tokens counted)
SKIP_RULE = ("LongMemEval's run_retrieval.py: a pair is skipped when no user turn of its haystack "
             "has a truthy has_answer (after the 30 _abs abstention questions)")


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


session_text, turn_text = granularities.session_text, granularities.turn_text


def official_session_text(session: list[dict[str, Any]]) -> str:
    """LongMemEval's session key: the user turns' contents joined by one space."""
    return " ".join(turn["content"] for turn in session if turn["role"] == "user")


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
    done = 0
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
            if not head.startswith(b"["):
                raise EvalError(f"{path}: LongMemEval data is one JSON list of instances, but the "
                                f"file starts with {head[:40]!r}")
            handle.seek(0)
            for item in ijson.items(handle, "item", use_float=True):
                yield item
                done += 1
    except (ijson.JSONError, UnicodeDecodeError) as exc:
        kind = "not UTF-8 text" if _is_encoding_error(exc) else "not a valid LongMemEval JSON array"
        raise EvalError(f"{path}: instance {done} (after {done} complete instances): {kind} "
                        f"({_short(exc)}) — is this the LongMemEval file, complete and undamaged?") from exc


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
    if not isinstance(value, str) or not value or any(c.isspace() or ord(c) < 32 or c == "\x7f"
                                                      for c in value):
        raise EvalError(f"{where}: {what} should be a non-empty string without whitespace or "
                        f"control characters (TREC files are whitespace-separated), got {value!r:.80}")
    return value


def _check_session(session: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(session, list):
        raise EvalError(f"{where}: a session should be a list of turns, got {type(session).__name__}")
    for turn in session:
        if not (isinstance(turn, dict) and isinstance(turn.get("role"), str)
                and isinstance(turn.get("content"), str)):
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
        raise EvalError(f"{where}: field 'haystack_dates' should be a list of dates like "
                        f"'2023/05/20 (Sat) 02:21', got {type(dates).__name__} {dates!r:.60}")
    if dates is not None and len(dates) != len(sessions):
        raise EvalError(f"{where}: {len(dates)} haystack_dates for {len(sessions)} sessions")

    seen: dict[str, str] = {}
    listed: Counter = Counter()
    listing: list[tuple[str, list[dict[str, Any]], int, str]] = []  # (id, turns, n-th listing, created_at)
    for i, (sid, session) in enumerate(zip(session_ids, sessions)):
        check_id(sid, f"haystack_session_ids[{i}]", where)
        if base_id(sid) != sid:
            raise EvalError(f"{where}: haystack_session_ids[{i}] = {sid!r} ends like the ids the harness "
                            "gives a session listed twice (#copyN); rename it")
        session = _check_session(session, f"{where}, session {sid}")
        tid = text_id(session_text(session))
        if seen.setdefault(sid, tid) != tid:
            raise EvalError(f"{where}: session id {sid} appears twice with different content")
        try:
            stamp = rfc3339(dates[i]) if dates is not None else None
        except (TypeError, ValueError) as exc:
            raise EvalError(f"{where}: haystack_dates[{i}] = {dates[i]!r} is not like "
                            f"'2023/05/20 (Sat) 02:21'") from exc
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
    pair = {"question_id": qid, "question_type": qtype, "question": question,
            "question_date": str(instance.get("question_date", "")), "gold": gold,
            "gold_source": source, "session_ids": [sid for sid, _, _ in kept]}
    return Instance(pair, kept, where, listing)


# ---------------------------------------------------------------- rows of each view


def seed_rows(instance: Instance, granularity: str, chunker: Callable | None) -> list[Row]:
    """The rows the granularity makes of each session (vipune_eval.granularities)."""
    make = granularities.get(granularity).seed_rows
    return [Row(key, sid, sid, text) for sid, session, _ in instance.sessions
            for key, text in make(sid, session, chunker)]


def _has_answer(turn: dict[str, Any], where: str, session: str, strict: bool) -> bool:
    """LongMemEval's reading of ``has_answer`` on a user turn of an ``answer`` session: truthy
    at session level (a missing key raises KeyError there), exactly true/false at turn level."""
    if "has_answer" not in turn:
        raise EvalError(f"{where}, session {session}: a user turn has no has_answer; LongMemEval's "
                        f"run_retrieval.py fails on it (KeyError), so the official view cannot be scored")
    if strict and turn["has_answer"] not in [True, False]:  # its assert: so 1 and 0 pass
        raise EvalError(f"{where}, session {session}: has_answer = {turn['has_answer']!r}; LongMemEval's "
                        "turn-level code asserts true or false, so the official turn view cannot be scored")
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
            raise EvalError(f"{instance.where}: evidence session {base_id(row.session)} is listed twice; "
                            "LongMemEval counts both copies under one correct id, which a run file cannot "
                            "hold, so the official view cannot score this pair")
    return rows


def has_user_side_evidence(instance: Instance) -> bool:
    """run_retrieval.py's skip rule: some user turn of the haystack has a truthy has_answer."""
    return any(bool(t.get("has_answer")) for _, session, _ in instance.sessions
               for t in session if t["role"] == "user")


def rows_of(instance: Instance, protocol: str, granularity: str,
            chunker: Callable | None) -> list[Row] | None:
    """The view's rows of an instance (the official view keeps every non-abstention pair:
    print_retrieval_metrics.py averages them all; its skip rule is a column of the pairs)."""
    if protocol == "official":
        return official_rows(instance, granularity)
    return seed_rows(instance, granularity, chunker)


def gold_of(instance: Instance, protocol: str, rows: list[Row]) -> list[str]:
    """Seed: the pair's gold sessions. Official: every corpus id holding ``answer``."""
    if protocol != "official":
        return instance.pair["gold"]
    return list(dict.fromkeys(r.doc for r in rows if "answer" in r.doc))


def created_at_of(instance: Instance) -> dict[str, str]:
    """Each row session's created_at (a repeated listing's own date under its copy key)."""
    return {sid + ("" if n == 1 else copy_id("", n)): stamp for sid, _, n, stamp in instance.listing}


# ---------------------------------------------------------------- chunks


def make_chunker(tokenizer_path: Path, max_tokens: int = MAX_ROW_TOKENS) -> Callable[[list[str]], list[str]]:
    """Greedy packing of a session's turn lines into rows of at most ``max_tokens`` tokens by the
    model's own tokenizer (special tokens counted, as vipune counts them); a turn longer than
    that is split at token boundaries. A session recurs in many haystacks: its packing is kept
    (as character spans, not texts) by the hash of its lines and computed once.

    Fast path: each line's tokens are counted once and the packing adds those counts. When no
    token straddles a line break (true of WordPiece and other tokenizers that split at whitespace)
    that is what counting each candidate row gives (checked on M-shaped data: rows identical to
    the slow path). A tokenizer known from its tokenizer.json to end every token at a line break
    (``tokens.tokens_end_at_line_breaks``: BERT's, bge-small's) has the lines counted alone, in one
    batch call without offsets; any other has the session tokenized whole and each line's tokens
    read from the offsets. Rows within a few tokens of the limit are counted again; a session
    whose tokens straddle a break, or whose near-limit row does not come out as added, is packed
    the slow way, counting every candidate row."""
    from vipune_eval.core.tokens import encode_counting, load_tokenizer, tokens_end_at_line_breaks

    tokenizer = load_tokenizer(tokenizer_path)
    lines_alone = tokens_end_at_line_breaks(tokenizer)
    encode_lines = encode_counting(tokenizer)
    plans: dict[str, tuple[tuple[tuple[int, int, int], ...], ...]] = {}

    def count(text: str) -> int:
        return len(tokenizer.encode(text).ids)

    def split_long(line: str) -> list[tuple[int, int]]:
        """Spans of ``line``, each at most ``max_tokens`` tokens, cut at token boundaries."""
        offsets = tokenizer.encode(line, add_special_tokens=False).offsets
        budget = max_tokens - count("")
        spans, start = [], 0
        while start < len(offsets):
            end = min(start + budget, len(offsets))
            while True:
                a, b = offsets[start][0], offsets[end - 1][1]
                piece = line[a:b]
                a, b = a + len(piece) - len(piece.lstrip()), b - len(piece) + len(piece.rstrip())
                if count(line[a:b]) <= max_tokens or end - start <= 1:
                    break
                end -= max(1, (end - start) // 20)
            if b > a:
                spans.append((a, b))
            start = end
        return spans

    def text(lines: list[str], parts: Iterable[tuple[int, int, int]]) -> str:
        return "\n".join(lines[i][a:b] for i, a, b in parts)

    def plan(lines: list[str]) -> tuple[tuple[tuple[int, int, int], ...], ...]:
        out: list[tuple[tuple[int, int, int], ...]] = []
        current: list[tuple[int, int, int]] = []
        for i, line in enumerate(lines):
            spans = [(0, len(line))] if count(line) <= max_tokens else split_long(line)
            for a, b in spans:
                if current and count(text(lines, [*current, (i, a, b)])) <= max_tokens:
                    current.append((i, a, b))
                else:
                    if current:
                        out.append(tuple(current))
                    current = [(i, a, b)]
        if current:
            out.append(tuple(current))
        return tuple(out)

    special = count("")
    RECOUNT_MARGIN = 16

    def line_tokens(lines: list[str]) -> np.ndarray | None:
        """Tokens (without special tokens) of each line; None when a token straddles a line
        break (the counts would not add up)."""
        if lines_alone:
            return np.fromiter((len(e) for e in encode_lines(lines, add_special_tokens=False)), np.int64, len(lines))
        starts = np.cumsum([0] + [len(line) + 1 for line in lines])  # each line's first character
        spans = tokenizer.encode("\n".join(lines), add_special_tokens=False).offsets
        offsets = np.fromiter(chain.from_iterable(spans), np.int64, 2 * len(spans)).reshape(-1, 2)
        line = np.searchsorted(starts, offsets[:, 0], side="right") - 1
        if (offsets[:, 1] > starts[line + 1] - 1).any():
            return None
        return np.bincount(line, minlength=len(lines))

    def fast_plan(lines: list[str]) -> tuple[tuple[tuple[int, int, int], ...], ...] | None:
        tokens = line_tokens(lines)
        if tokens is None:
            return None
        out: list[tuple[tuple[int, int, int], ...]] = []
        sizes: list[int] = []
        current: list[tuple[int, int, int]] = []
        size = special
        for i, line in enumerate(lines):
            if tokens[i] + special <= max_tokens:
                pieces = [(0, len(line), int(tokens[i]))]
            else:
                pieces = [(a, b, count(line[a:b]) - special) for a, b in split_long(line)]
            for a, b, n in pieces:
                if current and size + n <= max_tokens:
                    current.append((i, a, b))
                    size += n
                else:
                    if current:
                        out.append(tuple(current))
                        sizes.append(size)
                    current, size = [(i, a, b)], special + n
        if current:
            out.append(tuple(current))
            sizes.append(size)
        # Rows near the limit are counted again: a tokenizer whose counts did not add up across the
        # line breaks after all sends the session down the slow path rather than over the limit.
        near = [i for i, n in enumerate(sizes) if n > max_tokens - RECOUNT_MARGIN]
        if any(count(text(lines, out[i])) != sizes[i] for i in near):
            return None
        return tuple(out)

    def chunks(lines: list[str]) -> list[str]:
        key = text_id("\x00".join(lines))
        if key not in plans:
            plans[key] = (fast_plan(lines) if lines else None) or plan(lines)
        return [text(lines, parts) for parts in plans[key]]

    chunks.counts_lines_alone = lines_alone  # type: ignore[attr-defined]  # which fast path (tests)
    return chunks


# ---------------------------------------------------------------- the two stages


class _TextWriter:
    """Unique texts to Parquet in batches (the same filler text appears in many haystacks)."""

    def __init__(self, path: Path, batch: int = 2000) -> None:
        self.writer = pq.ParquetWriter(path, TEXTS_SCHEMA)
        self.seen: set[str] = set()
        self.pending: list[dict[str, str]] = []
        self.batch = batch

    def add(self, text: str) -> str:
        tid = text_id(text)
        if tid not in self.seen:
            self.seen.add(tid)
            self.pending.append({"text_id": tid, "text": text})
            if len(self.pending) >= self.batch:
                self.flush()
        return tid

    def flush(self) -> None:
        if self.pending:
            self.writer.write_table(pa.Table.from_pylist(self.pending, schema=TEXTS_SCHEMA))
            self.pending.clear()

    def close(self) -> None:
        self.flush()
        self.writer.close()


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


def run_rows(dataset: Path, protocol: str, granularity: str, rows_out: Path, texts_out: Path,
             tokenizer: Path | None = None, batch_pairs: int = 64) -> dict[str, int]:
    """Each pair's memory rows (the view's granularity) and the unique texts they and the
    questions hold. Returns counts (pairs, row slots, unique texts)."""
    kind = granularities.get(granularity or granularities.PRIMARY)
    granularity = kind.name
    if kind.needs_tokenizer and tokenizer is None:
        raise EvalError(f"{granularity} rows need the model's tokenizer.json (--tokenizer)")
    chunker = make_chunker(tokenizer) if kind.needs_tokenizer else None
    counts: Counter = Counter()
    with atomic_path(texts_out) as tmp_texts, atomic_path(rows_out) as tmp_rows:
        texts = _TextWriter(tmp_texts)
        writer = pq.ParquetWriter(tmp_rows, ROWS_SCHEMA)
        batch: list[dict[str, Any]] = []
        for instance in usable_instances(dataset, counts, None):
            rows = rows_of(instance, protocol, granularity, chunker)
            if rows is None:
                continue
            stamps = created_at_of(instance)
            pair = instance.pair
            batch.append({
                "question_id": pair["question_id"], "question": pair["question"],
                "question_text_id": texts.add(pair["question"]),
                "row_keys": [r.key for r in rows], "row_sessions": [r.session for r in rows],
                "row_docs": [r.doc for r in rows], "row_text_ids": [texts.add(r.text) for r in rows],
                "row_created_at": [stamps[r.session] for r in rows]})
            counts["pairs"] += 1
            counts["row_slots"] += len(rows)
            if len(batch) >= batch_pairs:
                writer.write_table(pa.Table.from_pylist(batch, schema=ROWS_SCHEMA))
                batch.clear()
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, schema=ROWS_SCHEMA))
        writer.close()
        texts.close()
        if counts["pairs"] == 0:
            raise EvalError(f"{dataset}: zero usable pairs under the {protocol} protocol")
        counts["unique_texts"] = len(texts.seen)
    log.info("filter rows (%s, %s): %d pairs, %d rows, %d unique texts", protocol, granularity, counts["pairs"],
             counts["row_slots"], counts["unique_texts"])
    return {k: counts[k] for k in ("pairs", "row_slots", "unique_texts")}


def run_pairs(dataset: Path, protocol: str, granularity: str, pairs_out: Path, qrels_out: Path,
              summary_out: Path, expected: dict[str, int] | None = None, split_seed: int = 0,
              dev_fraction: float = 0.2) -> dict[str, Any]:
    """The view's pairs (category, gold, split), its qrels and its counts per category."""
    granularity = granularities.get(granularity or granularities.PRIMARY).name
    official = protocol == "official"
    counts: Counter = Counter()
    pairs: list[dict[str, Any]] = []
    all_pairs: list[tuple[str, str]] = []  # every usable pair: the split is decided over these
    gold_sources: Counter = Counter()
    empty_gold = empty_gold_all = 0
    for instance in usable_instances(dataset, counts, expected.get("instances") if expected else None):
        pair = instance.pair
        all_pairs.append((pair["question_id"], pair["question_type"]))
        rows = rows_of(instance, protocol, granularity, None) if official else []
        pair = {**pair, "user_side_evidence": has_user_side_evidence(instance)}
        gold = gold_of(instance, protocol, rows)
        if official:
            empty_gold += not gold and pair["user_side_evidence"]  # in run_retrieval.py's set
            empty_gold_all += not gold
            pair = {**pair, "gold": gold, "gold_source": "official: ids holding 'answer'"}
        pairs.append({k: pair[k] for k in ("question_id", "question_type", "question", "question_date",
                                           "gold", "gold_source", "session_ids", "user_side_evidence")})
        gold_sources[pair["gold_source"]] += 1
        counts["session_slots"] += len(pair["session_ids"])
    labels = splits.assign(all_pairs, split_seed, dev_fraction)
    for pair in pairs:
        pair["split"] = labels[pair["question_id"]]
    summary: dict[str, Any] = {
        "protocol": protocol, "granularity": granularity,
        "instances": counts["instances"], "abstention": counts["abstention"], "pairs": len(pairs),
        "per_category": dict(sorted(Counter(p["question_type"] for p in pairs).items())),
        "gold_source": dict(gold_sources), "session_slots": counts["session_slots"],
        "created_at_policy": "haystack_dates of the session (UTC); 2000-01-01 + index minutes when absent",
        "split": {"seed": split_seed, "dev_fraction": dev_fraction,
                  "dev": sum(p["split"] == "dev" for p in pairs),
                  "test": sum(p["split"] == "test" for p in pairs)},
    }
    if official:
        summary["skip_rule"] = SKIP_RULE
        # "pairs": the set run_retrieval.py averages (its `metrics`); "pairs_all": every
        # non-abstention pair, all searched and in the qrels (print_retrieval_metrics.py's set)
        summary["skipped_without_user_side_evidence"] = sum(not p["user_side_evidence"] for p in pairs)
        summary["pairs_all"] = len(pairs)
        summary["pairs"] = len(pairs) - summary["skipped_without_user_side_evidence"]
        summary["pairs_with_empty_gold"] = empty_gold
        summary["pairs_all_with_empty_gold"] = empty_gold_all
    check_expected(dataset, summary, len(all_pairs), expected)
    with atomic_path(pairs_out) as tmp:
        pq.write_table(pa.Table.from_pylist(pairs, schema=PAIRS_SCHEMA), tmp)
    trec.write_qrels(qrels_out, {p["question_id"]: p["gold"] for p in pairs})
    write_json(summary_out, summary)
    log.info("filter (%s, %s): %d instances, %d abstention, %d pairs", protocol, granularity, summary["instances"],
             summary["abstention"], summary["pairs"])
    return summary


def check_expected(dataset: Path, summary: dict[str, Any], usable: int,
                   expected: dict[str, int] | None) -> None:
    if usable == 0:
        raise EvalError(f"{dataset}: zero usable pairs ({summary['instances']} instances, "
                        f"{summary['abstention']} abstention)")
    if expected is None:
        return
    found = {"instances": summary["instances"], "abstention": summary["abstention"], "pairs": usable}
    wrong = {k: (v, found[k]) for k, v in expected.items() if found[k] != v}
    if wrong:
        detail = ", ".join(f"{k}: expected {want}, found {got}" for k, (want, got) in wrong.items())
        raise EvalError(f"{dataset}: counts differ from dataset.expected ({detail}); per category: "
                        f"{summary['per_category']}",
                        fix="wrong file? Fix dataset.filename or dataset.path; for another file on "
                            "purpose, set dataset.expected to its counts, or to null to skip the check")


def read_pairs(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()
