"""filter: abstention dropping, gold fallback, dedup, count checks, bad input, the views' rows
(the chunker: test_chunking.py)."""

import json

import pyarrow.parquet as pq
import pytest

from support.config import DEFAULTS
from support.synthetic import write_dataset
from support.tinymodel import build_tiny_model
from vipune_eval.core.io import text_id
from vipune_eval.core.tokens import load_tokenizer
from vipune_eval.errors import EvalError
from vipune_eval.registry.granularities import session_text
from vipune_eval.stages.filter.pairs import run_pairs
from vipune_eval.stages.filter.rows import run_rows


def read_pairs(path):
    return pq.read_table(path).to_pylist()


def pairs_of(path, out, expected=None, protocol="seed", granularity="session", **kw):
    split = {"split_seed": DEFAULTS["split"]["seed"], "dev_fraction": DEFAULTS["split"]["dev_fraction"], **kw}
    return run_pairs(
        path, protocol, granularity, out / "pairs.parquet", out / "qrels.txt", out / "summary.json", expected, **split
    )


def rows_of(path, out, protocol="seed", granularity="session", tokenizer=None):
    run_rows(path, protocol, granularity, out / "rows.parquet", out / "texts.parquet", tokenizer)
    texts = {t["text_id"]: t["text"] for t in pq.read_table(out / "texts.parquet").to_pylist()}
    return {r["question_id"]: r for r in pq.read_table(out / "rows.parquet").to_pylist()}, texts


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "data.json"
    summary = write_dataset(
        path, instances=24, abstention=4, sessions_per_haystack=10, filler_pool=30, gold_fallback=3, seed=1
    )
    return path, summary


def test_counts_gold_sources_and_dedup(generated, tmp_path):
    path, generated_summary = generated
    summary = pairs_of(path, tmp_path, {"instances": 24, "abstention": 4, "pairs": 20})
    assert summary["per_category"] == generated_summary.per_category
    assert summary["gold_source"] == {"answer_session_ids": 17, "has_answer": 3}
    pairs = read_pairs(tmp_path / "pairs.parquet")
    assert len(pairs) == 20 and not any(p["question_id"].endswith("_abs") for p in pairs)
    rows, texts = rows_of(path, tmp_path)
    # Filler sessions repeat across haystacks: far fewer unique texts than session slots.
    assert len(texts) < summary["session_slots"]
    assert set(texts) >= {r["question_text_id"] for r in rows.values()}
    raw = {i["question_id"]: i for i in json.loads(path.read_text())}
    for pair in pairs:
        instance = raw[pair["question_id"]]
        assert pair["session_ids"] == instance["haystack_session_ids"]
        row = rows[pair["question_id"]]
        assert row["row_keys"] == row["row_sessions"] == row["row_docs"] == pair["session_ids"]
        assert row["row_text_ids"][0] == text_id(session_text(instance["haystack_sessions"][0]))
        if pair["gold_source"] == "has_answer":
            assert not instance.get("answer_session_ids")
            held = [
                sid
                for sid, s in zip(instance["haystack_session_ids"], instance["haystack_sessions"])
                if any(t.get("has_answer") is True for t in s)
            ]
            assert pair["gold"] == held
        else:
            assert pair["gold"] == instance["answer_session_ids"]
    qrels = (tmp_path / "qrels.txt").read_text().splitlines()
    assert len(qrels) == sum(len(p["gold"]) for p in pairs)


def test_session_text_joins_turns_as_role_content_lines():
    assert (
        session_text([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
        == "user: hi\nassistant: yo"
    )


def test_count_mismatch_names_the_counts_and_writes_nothing(generated, tmp_path):
    path, _ = generated
    with pytest.raises(EvalError, match=r"pairs: expected 470, found 20") as info:
        pairs_of(path, tmp_path, {"instances": 24, "abstention": 4, "pairs": 470})
    assert "dataset.expected" in info.value.fix  # the failed run's summary repeats it
    assert list(tmp_path.iterdir()) == []
    summary = pairs_of(path, tmp_path, None)  # expected: null switches the check off
    assert summary["pairs"] == 20


def instance(qid="q1", **overrides):
    base = {
        "question_id": qid,
        "question_type": "single-session-user",
        "question": "Where?",
        "answer": "x",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 02:21"],
        "haystack_session_ids": ["s1", "s2"],
        "haystack_sessions": [
            [{"role": "user", "content": "a", "has_answer": True}],
            [{"role": "user", "content": "b"}],
        ],
        "answer_session_ids": ["s1"],
    }
    base.update(overrides)
    return base


@pytest.mark.parametrize(
    "content, message",
    [
        (b'[{"question_id": "q1", ', "instance 0 .*not a valid LongMemEval JSON"),
        (b'{"question_id": "q1"}', "one JSON list of instances"),
        (b"[]", "holds no instances"),
        (json.dumps([{k: v for k, v in instance().items() if k != "question"}]).encode(), "'question' is missing"),
        (json.dumps([instance(question=3)]).encode(), "'question' should be str"),
        (json.dumps([instance(haystack_session_ids=["s1"])]).encode(), "1 haystack_session_ids but 2"),
        (
            json.dumps([instance(haystack_session_ids=[], haystack_sessions=[], haystack_dates=[])]).encode(),
            "empty haystack",
        ),
        (json.dumps([instance(answer_session_ids=["nope"])]).encode(), r"\['nope'\] are not in the haystack"),
        (json.dumps([instance(), instance()]).encode(), "duplicate question_id q1"),
        (json.dumps([instance(qid="q1_abs")]).encode(), "zero usable pairs"),
        (
            json.dumps(
                [
                    instance(
                        answer_session_ids=[],
                        haystack_sessions=[[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]],
                    )
                ]
            ).encode(),
            "no gold session",
        ),
        (b'[{"question_id": "q\xff1"}]', "instance 0 .*not UTF-8"),
        # issue 10: each of these gave a traceback or a misleading message
        (
            json.dumps([instance(haystack_dates=5)]).encode(),
            r"instance 0 \(question_id q1\): field 'haystack_dates' should be a list .*got int 5",
        ),
        (
            json.dumps([instance(haystack_dates="2023/05/20 (Sat) 02:21")]).encode(),
            r"field 'haystack_dates' should be a list .*got str",
        ),
        (
            json.dumps([instance(qid="q\u00001")]).encode(),
            r"question_id should be a non-empty string without "
            r"whitespace or control characters",
        ),
        (json.dumps([instance(qid="q 1")]).encode(), r"question_id should be .*TREC files are whitespace-separated"),
    ],
)
def test_bad_input_names_file_and_question(tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    with pytest.raises(EvalError, match=message) as info:
        pairs_of(bad, tmp_path / "out")
    assert str(bad) in str(info.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_non_utf8_in_a_later_instance_names_the_instance_without_a_parser_dump(tmp_path):
    good = json.dumps([instance("q1"), instance("q2")]).encode()
    bad = tmp_path / "bad.json"
    bad.write_bytes(good[:-1] + b', {"question_id": "q3", "question": "\xff\xfe ' + b"x" * 5000 + b'"}]')
    with pytest.raises(EvalError, match=r"bad.json: instance 2 \(after 2 complete instances\): not UTF-8") as info:
        pairs_of(bad, tmp_path / "out")
    assert len(str(info.value)) < 500


def test_a_utf8_bom_at_the_start_is_accepted(tmp_path, generated):
    """Issue 32 item 9: the start check stripped the BOM, then ijson read from byte 0 and failed
    with "not a valid LongMemEval JSON array (lexical error …)"."""
    path, _ = generated
    with_bom = tmp_path / "bom.json"
    with_bom.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    pairs_of(with_bom, tmp_path / "bom")
    pairs_of(path, tmp_path / "plain")
    assert read_pairs(tmp_path / "bom/pairs.parquet") == read_pairs(tmp_path / "plain/pairs.parquet")
    # only a whole BOM is skipped: a stray byte of one is still refused
    (tmp_path / "stray.json").write_bytes(b"\xbb" + path.read_bytes())
    with pytest.raises(EvalError, match="stray.json"):
        pairs_of(tmp_path / "stray.json", tmp_path / "stray")


def test_question_with_quotes_dash_and_nul_is_kept_as_data(tmp_path):
    question = '-rf "quoted" \x00 --limit 5'
    path = tmp_path / "d.json"
    path.write_text(json.dumps([instance(question=question)]))
    pairs_of(path, tmp_path)
    assert read_pairs(tmp_path / "pairs.parquet")[0]["question"] == '-rf "quoted"   --limit 5'  # NUL → space


def test_question_ids_with_separators_and_dashes_are_data(tmp_path):
    ids = ["a::b", "x/y", "-lead", "s1::s2"]
    path = tmp_path / "d.json"
    path.write_text(json.dumps([instance(q) for q in ids]))
    pairs_of(path, tmp_path)
    assert [p["question_id"] for p in read_pairs(tmp_path / "pairs.parquet")] == ids


def official(tmp_path, data, granularity="session"):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "d.json"
    path.write_text(json.dumps(data))
    out = tmp_path / granularity
    summary = pairs_of(path, out, protocol="official", granularity=granularity)
    rows, texts = rows_of(path, out, "official", granularity)
    return summary, {p["question_id"]: p for p in read_pairs(out / "pairs.parquet")}, rows, texts


OFFICIAL_DATA = [
    # user-side evidence in an answer session; an assistant turn between
    instance(
        "q1",
        haystack_session_ids=["answer_a1", "b"],
        answer_session_ids=["answer_a1"],
        haystack_sessions=[
            [
                {"role": "user", "content": "I adopted Luna", "has_answer": True},
                {"role": "assistant", "content": "Nice"},
                {"role": "user", "content": "she is grey", "has_answer": False},
            ],
            [{"role": "user", "content": "b"}],
        ],
    ),
    # the evidence is on the assistant side only: skipped by run_retrieval.py's rule
    instance(
        "q2",
        haystack_session_ids=["s1", "answer_a2"],
        answer_session_ids=["answer_a2"],
        haystack_sessions=[
            [{"role": "user", "content": "a"}],
            [
                {"role": "user", "content": "what time?", "has_answer": False},
                {"role": "assistant", "content": "9", "has_answer": True},
            ],
        ],
    ),
    # two answer sessions, one without user-side evidence (it becomes noans_), an empty session,
    # and a truthy non-boolean has_answer
    instance(
        "q3",
        haystack_session_ids=["answer_x", "answer_y", "empty"],
        answer_session_ids=["answer_x", "answer_y"],
        haystack_dates=["2023/05/20 (Sat) 02:21"] * 3,
        haystack_sessions=[
            [{"role": "user", "content": "x", "has_answer": 1}],
            [
                {"role": "user", "content": "hm", "has_answer": False},
                {"role": "assistant", "content": "only the assistant says it", "has_answer": True},
            ],
            [{"role": "assistant", "content": "nobody asked"}],
        ],
    ),
]


def test_official_session_view_is_longmemevals_corpus_gold_and_skip_rule(tmp_path):
    summary, pairs, rows, texts = official(tmp_path, OFFICIAL_DATA)
    assert summary["pairs"] == 2 and summary["skipped_without_user_side_evidence"] == 1
    # every non-abstention pair is searched (print_retrieval_metrics.py's set); the skip rule is
    # a column: run_retrieval.py's set is the pairs with user-side evidence
    assert {q for q, p in pairs.items() if p["user_side_evidence"]} == {"q1", "q3"}
    assert set(pairs) == {"q1", "q2", "q3"} and summary["pairs_all"] == 3
    assert pairs["q2"]["gold"] == [] and rows["q2"]["row_docs"] == ["s1", "noans_a2"]
    # Row text: the user turns' contents joined by one space, no role prefix, no newline.
    q1 = rows["q1"]
    assert [texts[t] for t in q1["row_text_ids"]] == ["I adopted Luna she is grey", "b"]
    # An empty session stays, as an empty row; an answer session without user-side evidence
    # becomes noans_ and is not gold; a truthy has_answer (1) counts.
    q3 = rows["q3"]
    assert q3["row_docs"] == ["answer_x", "noans_y", "empty"]
    assert [texts[t] for t in q3["row_text_ids"]] == ["x", "hm", ""]
    assert pairs["q3"]["gold"] == ["answer_x"] and pairs["q1"]["gold"] == ["answer_a1"]
    assert (tmp_path / "session" / "qrels.txt").read_text().splitlines() == ["q1 0 answer_a1 1", "q3 0 answer_x 1"]


def test_official_turn_view_keys_user_turns_by_position_over_both_roles(tmp_path):
    _, pairs, rows, texts = official(tmp_path, OFFICIAL_DATA, "turn")
    q1 = rows["q1"]
    assert q1["row_docs"] == ["answer_a1_1", "noans_a1_3", "b_1"]
    assert [texts[t] for t in q1["row_text_ids"]] == ["I adopted Luna", "she is grey", "b"]
    assert pairs["q1"]["gold"] == ["answer_a1_1"]
    # has_answer 1 passes its `in [True, False]` assert (1 == True); the empty session adds no row
    assert rows["q3"]["row_docs"] == ["answer_x_1", "noans_y_1"] and pairs["q3"]["gold"] == ["answer_x_1"]
    strict = json.loads(json.dumps(OFFICIAL_DATA))
    strict[2]["haystack_sessions"][0][0]["has_answer"] = "yes"
    with pytest.raises(EvalError, match=r"has_answer = 'yes'; LongMemEval's turn-level code asserts true or false"):
        official(tmp_path / "strict", strict, "turn")


def test_official_view_names_a_user_turn_without_has_answer(tmp_path):
    data = [
        instance(
            "q1",
            haystack_session_ids=["answer_a", "b"],
            answer_session_ids=["answer_a"],
            haystack_sessions=[
                [{"role": "user", "content": "x", "has_answer": True}, {"role": "user", "content": "y"}],
                [{"role": "user", "content": "b"}],
            ],
        )
    ]
    with pytest.raises(EvalError, match=r"session answer_a: a user turn has no has_answer.*KeyError"):
        official(tmp_path, data)


def test_turn_rows_and_chunk_rows_of_at_most_512_tokens(generated, tmp_path):
    path, _ = generated
    model = build_tiny_model(tmp_path / "model")
    sessions, _ = rows_of(path, tmp_path / "session")
    turns, turn_texts = rows_of(path, tmp_path / "turn", granularity="turn")
    raw = {i["question_id"]: i for i in json.loads(path.read_text())}
    for qid, row in turns.items():
        sessions_in_order = raw[qid]["haystack_sessions"]
        assert len(row["row_keys"]) == sum(len(s) for s in sessions_in_order)
        assert len(set(row["row_keys"])) == len(row["row_keys"])
        first = sessions_in_order[0][0]
        assert turn_texts[row["row_text_ids"][0]] == f"{first['role']}: {first['content']}"
        assert set(row["row_sessions"]) == set(sessions[qid]["row_sessions"])
    # Long turns: a dataset whose turns are longer than 512 tokens gets split at token boundaries.
    long = tmp_path / "long.json"
    write_dataset(
        long,
        instances=3,
        abstention=0,
        sessions_per_haystack=4,
        filler_pool=6,
        turns_per_session=6,
        words_per_turn=600,
        seed=2,
    )
    chunks, texts = rows_of(long, tmp_path / "chunk", granularity="chunk", tokenizer=model / "tokenizer.json")
    tokenizer = load_tokenizer(model / "tokenizer.json")
    counts = [len(tokenizer.encode(texts[t]).ids) for r in chunks.values() for t in r["row_text_ids"]]
    assert max(counts) <= 512 and len(counts) >= 2 * 3 * 4 * 6  # every 600-word turn needs two rows
    raw = {i["question_id"]: i for i in json.loads(long.read_text())}
    for qid, row in chunks.items():  # nothing is lost: a session's chunks hold all its words
        for sid, session in zip(raw[qid]["haystack_session_ids"], raw[qid]["haystack_sessions"]):
            mine = [texts[t] for t, s in zip(row["row_text_ids"], row["row_sessions"]) if s == sid]
            squeeze = "".join  # pieces of a long turn are cut at token boundaries, between two tokens
            assert squeeze(" ".join(mine).split()) == squeeze(
                " ".join(f"{t['role']}: {t['content']}" for t in session).split()
            )


def test_official_view_keeps_a_session_listed_twice_as_longmemevals_corpus_does(tmp_path):
    """LongMemEval issue #54: filler sessions repeated in one haystack (same content, other date).
    process_item_flat_index keeps both; the seed protocol stores the session once."""
    filler = [
        {"role": "user", "content": "filler talk"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "more"},
    ]
    data = [
        instance(
            "q1",
            haystack_session_ids=["answer_a", "f", "b", "f"],
            answer_session_ids=["answer_a"],
            haystack_dates=[
                "2023/05/20 (Sat) 02:21",
                "2023/05/21 (Sun) 02:21",
                "2023/05/22 (Mon) 02:21",
                "2023/05/23 (Tue) 02:21",
            ],
            haystack_sessions=[
                [{"role": "user", "content": "a", "has_answer": True}],
                filler,
                [{"role": "user", "content": "b"}],
                filler,
            ],
        )
    ]
    _, pairs, rows, texts = official(tmp_path / "s", data)
    row = rows["q1"]
    assert row["row_docs"] == ["answer_a", "f", "b", "f#copy2"]
    assert [texts[t] for t in row["row_text_ids"]] == ["a", "filler talk more", "b", "filler talk more"]
    assert row["row_created_at"][1] == "2023-05-21T02:21:00Z" and row["row_created_at"][3] == "2023-05-23T02:21:00Z"
    assert pairs["q1"]["gold"] == ["answer_a"]
    _, _, turns, _ = official(tmp_path / "t", data, "turn")
    assert turns["q1"]["row_docs"] == ["answer_a_1", "f_1", "f_3", "b_1", "f_1#copy2", "f_3#copy2"]
    assert len(set(turns["q1"]["row_keys"])) == 6  # distinct rows for vipune
    seed_rows, _ = rows_of(tmp_path / "s" / "d.json", tmp_path / "seed")
    assert seed_rows["q1"]["row_docs"] == ["answer_a", "f", "b"]
    # A repeated evidence session would need one correct id for two documents: refused.
    gold_twice = json.loads(json.dumps(data))
    gold_twice[0]["haystack_session_ids"][3] = "answer_a"
    gold_twice[0]["haystack_sessions"][3] = gold_twice[0]["haystack_sessions"][0]
    with pytest.raises(EvalError, match=r"evidence session answer_a is listed twice"):
        official(tmp_path / "g", gold_twice)
    own = json.loads(json.dumps(data))
    own[0]["haystack_session_ids"][2] = "b#copy2"
    with pytest.raises(EvalError, match=r"haystack_session_ids\[2\] = 'b#copy2' ends like"):
        official(tmp_path / "o", own)


def test_an_abs_anywhere_in_the_id_is_an_abstention_question_as_in_longmemeval(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps([instance("q1"), instance("q2_abs_x"), instance("q3_abs")]))
    summary = pairs_of(path, tmp_path / "out")
    assert summary["abstention"] == 2 and summary["pairs"] == 1


def test_integer_answers_as_in_the_real_file_are_read_in_every_view(tmp_path):
    """The real LongMemEval files mix string and integer `answer`s (HF `datasets` fails on them):
    both protocols' pairs and rows read them, and the answer is not what is scored."""
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([instance("q1", answer=3), instance("q2", answer="three"), instance("q3", answer=2.5)]))
    for protocol in ("seed", "official"):
        summary = pairs_of(path, tmp_path / protocol, {"instances": 3, "abstention": 0, "pairs": 3}, protocol=protocol)
        assert summary["pairs"] == 3
        rows, _ = rows_of(path, tmp_path / protocol, protocol=protocol)
        assert set(rows) == {"q1", "q2", "q3"}
