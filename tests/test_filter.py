"""filter: abstention dropping, gold fallback, dedup, count checks and bad input."""

import json

import pyarrow.parquet as pq
import pytest

from vipune_eval.filter import FilterOutputs, read_pairs, run_filter, session_text
from vipune_eval.io import EvalError, text_id
from support.synthetic import write_dataset


def outputs(tmp_path):
    return FilterOutputs(tmp_path / "pairs.parquet", tmp_path / "texts.parquet",
                         tmp_path / "qrels.txt", tmp_path / "summary.json")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "data.json"
    summary = write_dataset(path, instances=24, abstention=4, sessions_per_haystack=10,
                            filler_pool=30, gold_fallback=3, seed=1)
    return path, summary


def test_counts_gold_sources_and_dedup(generated, tmp_path):
    path, generated_summary = generated
    out = outputs(tmp_path)
    summary = run_filter(path, out, {"instances": 24, "abstention": 4, "pairs": 20})
    assert summary["per_category"] == generated_summary.per_category
    assert summary["gold_source"] == {"answer_session_ids": 17, "has_answer": 3}
    pairs = read_pairs(out.pairs)
    assert len(pairs) == 20 and not any(p["question_id"].endswith("_abs") for p in pairs)
    # Filler sessions repeat across haystacks: far fewer unique texts than session slots.
    texts = pq.read_table(out.texts).to_pylist()
    assert len(texts) == summary["unique_texts"] == len({t["text_id"] for t in texts})
    assert summary["unique_texts"] < summary["session_slots"]
    assert {t["text_id"] for t in texts} >= {p["question_text_id"] for p in pairs}
    raw = {i["question_id"]: i for i in json.loads(path.read_text())}
    for pair in pairs:
        instance = raw[pair["question_id"]]
        assert pair["session_ids"] == instance["haystack_session_ids"]
        first = instance["haystack_sessions"][0]
        assert pair["session_text_ids"][0] == text_id(session_text(first))
        if pair["gold_source"] == "has_answer":
            assert not instance.get("answer_session_ids")
            held = [sid for sid, s in zip(instance["haystack_session_ids"], instance["haystack_sessions"])
                    if any(t.get("has_answer") is True for t in s)]
            assert pair["gold"] == held
        else:
            assert pair["gold"] == instance["answer_session_ids"]
    qrels = out.qrels.read_text().splitlines()
    assert len(qrels) == sum(len(p["gold"]) for p in pairs)


def test_session_text_joins_turns_as_role_content_lines():
    assert session_text([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]) \
        == "user: hi\nassistant: yo"


def test_count_mismatch_names_the_counts_and_writes_nothing(generated, tmp_path):
    path, _ = generated
    out = outputs(tmp_path)
    with pytest.raises(EvalError, match=r"pairs: expected 470, found 20"):
        run_filter(path, out, {"instances": 24, "abstention": 4, "pairs": 470})
    assert list(tmp_path.iterdir()) == []
    summary = run_filter(path, out, None)  # expected: null switches the check off
    assert summary["pairs"] == 20


def instance(qid="q1", **overrides):
    base = {"question_id": qid, "question_type": "single-session-user", "question": "Where?",
            "answer": "x", "question_date": "2023/05/30 (Tue) 23:40",
            "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 02:21"],
            "haystack_session_ids": ["s1", "s2"],
            "haystack_sessions": [[{"role": "user", "content": "a", "has_answer": True}],
                                  [{"role": "user", "content": "b"}]],
            "answer_session_ids": ["s1"]}
    base.update(overrides)
    return base


@pytest.mark.parametrize("content, message", [
    (b'[{"question_id": "q1", ', "not a valid LongMemEval JSON"),
    (b'{"question_id": "q1"}', "one JSON list of instances"),
    (b'[]', "holds no instances"),
    (json.dumps([{k: v for k, v in instance().items() if k != "question"}]).encode(), "'question' is missing"),
    (json.dumps([instance(question=3)]).encode(), "'question' should be str"),
    (json.dumps([instance(haystack_session_ids=["s1"])]).encode(), "1 haystack_session_ids but 2"),
    (json.dumps([instance(haystack_session_ids=[], haystack_sessions=[], haystack_dates=[])]).encode(),
     "empty haystack"),
    (json.dumps([instance(answer_session_ids=["nope"])]).encode(), r"\['nope'\] are not in the haystack"),
    (json.dumps([instance(), instance()]).encode(), "duplicate question_id q1"),
    (json.dumps([instance(qid="q1_abs")]).encode(), "zero usable pairs"),
    (json.dumps([instance(answer_session_ids=[], haystack_sessions=[[{"role": "user", "content": "a"}],
                                                                    [{"role": "user", "content": "b"}]])]).encode(),
     "no gold session"),
    (b'[{"question_id": "q\xff1"}]', "UTF8"),
])
def test_bad_input_names_file_and_question(tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    out = outputs(tmp_path / "out")
    with pytest.raises(EvalError, match=message) as info:
        run_filter(bad, out, None)
    assert str(bad) in str(info.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_question_with_quotes_dash_and_nul_is_kept_as_data(tmp_path):
    question = '-rf "quoted" \x00 --limit 5'
    path = tmp_path / "d.json"
    path.write_text(json.dumps([instance(question=question)]))
    out = outputs(tmp_path)
    run_filter(path, out, None)
    assert read_pairs(out.pairs)[0]["question"] == '-rf "quoted"   --limit 5'  # NUL → space


def test_official_protocol_keeps_user_turns_and_user_side_gold(tmp_path):
    user_gold = instance("q1", haystack_sessions=[
        [{"role": "user", "content": "I adopted Luna", "has_answer": True}, {"role": "assistant", "content": "Nice"}],
        [{"role": "user", "content": "b"}]])
    assistant_gold = instance("q2", answer_session_ids=["s2"], haystack_sessions=[
        [{"role": "user", "content": "a"}],
        [{"role": "user", "content": "what time?"}, {"role": "assistant", "content": "9", "has_answer": True}]])
    two_gold = instance("q3", answer_session_ids=["s1", "s2"], haystack_sessions=[
        [{"role": "user", "content": "x", "has_answer": True}],
        [{"role": "assistant", "content": "only the assistant speaks", "has_answer": True}]])
    path = tmp_path / "d.json"
    path.write_text(json.dumps([user_gold, assistant_gold, two_gold]))
    out = FilterOutputs(tmp_path / "p.parquet", tmp_path / "t.parquet", tmp_path / "q.txt", tmp_path / "s.json",
                        tmp_path / "official-p.parquet", tmp_path / "official-q.txt")
    summary = run_filter(path, out, None)
    assert summary["pairs"] == 3
    assert summary["official"]["pairs"] == 2 and summary["official"]["skipped_without_user_side_gold"] == 1
    official = {p["question_id"]: p for p in read_pairs(out.official_pairs)}
    assert set(official) == {"q1", "q3"}
    assert official["q3"]["gold"] == ["s1"] and official["q3"]["session_ids"] == ["s1"]
    texts = dict(pq.read_table(out.texts).to_pylist()[i].values() for i in range(summary["unique_texts"]))
    assert texts[official["q1"]["session_text_ids"][0]] == "user: I adopted Luna"
    assert out.official_qrels.read_text().splitlines() == ["q1 0 s1 1", "q3 0 s1 1"]


@pytest.mark.parametrize("date", ["2023/05/20 (Sat) 02:21", "2024/02/29 (Thu) 23:59", "2023/5/20 (Sat) 2:21"])
def test_fast_date_path_agrees_with_strptime(date):
    from datetime import datetime, timezone

    from vipune_eval.filter import DATE_FORMAT, rfc3339

    expected = datetime.strptime(date, DATE_FORMAT).replace(tzinfo=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert rfc3339(date) == expected


def test_impossible_date_is_refused_with_the_instance_named(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps([instance(haystack_dates=["2023/02/30 (Thu) 10:00", "2023/05/21 (Sun) 02:21"])]))
    with pytest.raises(EvalError, match=r"question_id q1\): haystack_dates\[0\] = '2023/02/30"):
        run_filter(path, outputs(tmp_path / "o"), None)
