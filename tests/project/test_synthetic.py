"""The synthetic LongMemEval generator writes well-formed, deterministic, retrievable data."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before anything imports huggingface_hub

import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from support.synthetic import (
    COMMON_WORDS,
    QUESTION_TYPES,
    VOCABULARY,
    DatasetSummary,
    write_dataset,
)

KEYS = [
    "question_id",
    "question_type",
    "question",
    "answer",
    "question_date",
    "haystack_dates",
    "haystack_session_ids",
    "haystack_sessions",
    "answer_session_ids",
]
DATE = re.compile(r"^\d{4}/\d{2}/\d{2} \((Mon|Tue|Wed|Thu|Fri|Sat|Sun)\) \d{2}:\d{2}$")
PARAMS: dict[str, Any] = dict(
    instances=24, abstention=3, sessions_per_haystack=12, filler_pool=40, gold_fallback=2, seed=7
)


@pytest.fixture(scope="module")
def written(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, DatasetSummary, list[dict[str, Any]]]:
    path = tmp_path_factory.mktemp("syn") / "longmemeval_syn.json"
    summary = write_dataset(path, **PARAMS)
    return path, summary, json.loads(path.read_text(encoding="utf-8"))


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def session_text(session: list[dict[str, Any]]) -> str:
    return " ".join(turn["content"] for turn in session)


def evidence_ids(instance: dict[str, Any]) -> list[str]:
    return [
        sid
        for sid, session in zip(instance["haystack_session_ids"], instance["haystack_sessions"])
        if any(turn.get("has_answer") is True for turn in session)
    ]


def test_counts_and_schema(written: tuple[Path, DatasetSummary, list[dict[str, Any]]]) -> None:
    _, summary, data = written
    assert len(data) == summary.instances == PARAMS["instances"]
    assert summary.abstention == PARAMS["abstention"]
    assert summary.pairs == PARAMS["instances"] - PARAMS["abstention"]
    for instance in data:
        assert [k for k in KEYS if k in instance] == [k for k in instance]  # LongMemEval key order
        assert set(instance) >= set(KEYS) - {"answer_session_ids"}
        n = PARAMS["sessions_per_haystack"]
        assert len(instance["haystack_dates"]) == len(instance["haystack_session_ids"]) == n
        assert len(instance["haystack_sessions"]) == n
        assert len(set(instance["haystack_session_ids"])) == n
        for session in instance["haystack_sessions"]:
            assert [t["role"] for t in session] == ["user", "assistant"] * 2
            assert all(isinstance(t["content"], str) and t["content"] for t in session)
    assert [i["question_type"] for i in data[:6]] == list(QUESTION_TYPES)
    usable = Counter(i["question_type"] for i in data if not i["question_id"].endswith("_abs"))
    assert summary.per_category == {t: usable[t] for t in QUESTION_TYPES}
    assert sum(summary.per_category.values()) == summary.pairs
    assert summary.session_slots == sum(len(i["haystack_sessions"]) for i in data)
    contents = {json.dumps(s) for i in data for s in i["haystack_sessions"]}
    assert summary.unique_sessions == len(contents) < summary.session_slots


def test_filler_sessions_repeat_identically(
    written: tuple[Path, DatasetSummary, list[dict[str, Any]]],
) -> None:
    _, _, data = written
    contents: dict[str, set[str]] = defaultdict(set)
    owners: dict[str, set[str]] = defaultdict(set)
    for instance in data:
        for sid, session in zip(instance["haystack_session_ids"], instance["haystack_sessions"]):
            contents[sid].add(json.dumps(session))
            owners[sid].add(instance["question_id"])
    assert all(len(c) == 1 for c in contents.values())  # same id, same content
    fillers = [sid for sid in owners if not sid.startswith("answer_")]
    assert all(re.fullmatch(r"sharegpt_[A-Za-z0-9]{7}_0|ultrachat_\d+", sid) for sid in fillers)
    assert sum(len(owners[sid]) > 1 for sid in fillers) > len(fillers) // 2
    answers = [sid for sid in owners if sid.startswith("answer_")]
    assert all(len(owners[sid]) == 1 for sid in answers)
    assert all(sid.split("_")[1] == next(iter(owners[sid])).removesuffix("_abs") for sid in answers)


def test_abstention_ids(written: tuple[Path, DatasetSummary, list[dict[str, Any]]]) -> None:
    _, _, data = written
    ids = [i["question_id"] for i in data]
    assert len(set(ids)) == len(ids)
    assert sum(qid.endswith("_abs") for qid in ids) == PARAMS["abstention"]
    assert all(re.fullmatch(r"[0-9a-f]{8}(_abs)?", qid) for qid in ids)


def test_gold_sessions_and_has_answer(
    written: tuple[Path, DatasetSummary, list[dict[str, Any]]],
) -> None:
    _, _, data = written
    positions = set()
    for instance in data:
        evidence = evidence_ids(instance)
        assert 1 <= len(evidence) <= 3
        if instance["question_type"] == "multi-session":
            assert len(evidence) >= 2
        if instance.get("answer_session_ids"):
            assert instance["answer_session_ids"] == evidence
        assistant = instance["question_type"] == "single-session-assistant"
        for sid, session in zip(instance["haystack_session_ids"], instance["haystack_sessions"]):
            marked = [t["role"] for t in session if t.get("has_answer") is True]
            if sid in evidence:
                positions.add(instance["haystack_session_ids"].index(sid))
                assert marked == (["assistant"] if assistant else ["user"])
            else:
                assert not marked and not any("has_answer" in t for t in session)
    assert len(positions) > 3  # gold sessions are not always at the same place
    assert any(len(evidence_ids(i)) > 1 for i in data if i["question_type"] != "multi-session")


def test_gold_fallback_instances(
    written: tuple[Path, DatasetSummary, list[dict[str, Any]]],
) -> None:
    _, _, data = written
    fallback = [i for i in data if not i.get("answer_session_ids")]
    assert len(fallback) == PARAMS["gold_fallback"]
    assert sorted("answer_session_ids" in i for i in fallback) == [False, True]  # missing and []
    for instance in fallback:
        assert not instance["question_id"].endswith("_abs")
        assert evidence_ids(instance)


def test_dates_increase(written: tuple[Path, DatasetSummary, list[dict[str, Any]]]) -> None:
    _, _, data = written

    def parse(text: str) -> datetime:
        assert DATE.match(text), text
        return datetime.strptime(text[:10] + text[-6:], "%Y/%m/%d %H:%M")

    for instance in data:
        dates = [parse(d) for d in instance["haystack_dates"]]
        assert dates == sorted(dates) and len(set(dates)) == len(dates)
        assert parse(instance["question_date"]) > dates[-1]


def test_questions_overlap_gold_partially(
    written: tuple[Path, DatasetSummary, list[dict[str, Any]]],
) -> None:
    _, _, data = written
    vocabulary = set(VOCABULARY)
    for instance in data:
        question = words(instance["question"])
        assert question <= vocabulary
        gold = set(evidence_ids(instance))
        gold_words = set().union(
            *(
                words(session_text(s))
                for sid, s in zip(instance["haystack_session_ids"], instance["haystack_sessions"])
                if sid in gold
            )
        )
        topic_shared = (question & gold_words) - set(COMMON_WORDS)
        assert len(topic_shared) >= 3, instance["question"]
        keyword_query = len(instance["question"].split()) == 3
        # Keyword queries are all gold words (an AND query finds the gold session); the
        # sentence questions hold words the gold sessions never use (an AND query misses).
        assert bool(question - gold_words) != keyword_query, instance["question"]
    # filler sessions use topic words too, so the question's topic words are not unique to gold
    hits = 0
    for instance in data:
        question = words(instance["question"]) - set(COMMON_WORDS)
        gold = set(evidence_ids(instance))
        hits += any(
            question & words(session_text(s))
            for sid, s in zip(instance["haystack_session_ids"], instance["haystack_sessions"])
            if sid not in gold
        )
    assert hits >= len(data) // 8


def test_deterministic(tmp_path: Path, written: tuple[Path, DatasetSummary, list[dict[str, Any]]]) -> None:
    path, summary, _ = written
    again = write_dataset(tmp_path / "again.json", **PARAMS)
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()
    assert again == summary
    write_dataset(tmp_path / "other.json", **{**PARAMS, "seed": 8})
    assert (tmp_path / "other.json").read_bytes() != path.read_bytes()


def test_rejects_too_small_pool(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_dataset(tmp_path / "x.json", sessions_per_haystack=20, filler_pool=10)
    with pytest.raises(ValueError):
        write_dataset(tmp_path / "x.json", instances=3, abstention=4)
    # more fallback instances than usable ones: all usable instances fall back
    write_dataset(tmp_path / "x.json", instances=3, abstention=2, gold_fallback=2)
    (usable,) = [i for i in json.loads((tmp_path / "x.json").read_text()) if "_abs" not in i["question_id"]]
    assert "answer_session_ids" not in usable


def test_cli(tmp_path: Path) -> None:
    out = tmp_path / "cli.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "support.synthetic",
            str(out),
            "--instances",
            "7",
            "--abstention",
            "1",
            "--sessions",
            "5",
            "--filler-pool",
            "9",
            "--words-per-turn",
            "12",
            "--seed",
            "3",
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[1],  # tests/, where `support` is a package
    )
    summary = json.loads(result.stdout)
    data = json.loads(out.read_text())
    assert summary["instances"] == len(data) == 7 and summary["pairs"] == 6
    assert summary["session_slots"] == 35
    assert all(len(i["haystack_sessions"]) == 5 for i in data)


def test_question_closer_to_gold_than_fillers(
    tmp_path: Path, written: tuple[Path, DatasetSummary, list[dict[str, Any]]]
) -> None:
    from support.tinymodel import build_tiny_model
    from vipune_eval.stages.embed.embed import load_model

    _, _, data = written
    model = load_model(build_tiny_model(tmp_path / "m"), "model.onnx", "mean", threads=1)
    closer = 0
    for instance in data:
        gold = set(evidence_ids(instance))
        (question,) = model.embed([instance["question"]])
        sessions = np.array(list(model.embed([session_text(s) for s in instance["haystack_sessions"]])))
        sims = sessions @ question
        is_gold = np.array([sid in gold for sid in instance["haystack_session_ids"]])
        closer += sims[is_gold].mean() > sims[~is_gold].mean()
    assert closer >= 0.8 * len(data)
