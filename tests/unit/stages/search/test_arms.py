"""The reference retrievers mirror vipune's hybrid search: BM25 query, pools, RRF, tie-breaks."""

import numpy as np
import pytest

from support.search import duplicated_haystack, rrf, search_persona
from vipune_eval.core.persona import Persona
from vipune_eval.stages.search.arms import Bm25Index, dense, fts_and_query, fts_or_query
from vipune_eval.vipune.contract import candidate_pool


def make_persona(texts, vectors=None, query="", query_vector=None, created=None):
    n = len(texts)
    vectors = np.eye(n, 4, dtype=np.float32) if vectors is None else np.asarray(vectors, np.float32)
    return Persona(
        question_id="q1",
        question=query,
        row_ids=[f"q1::s{i}" for i in range(n)],
        session_ids=[f"s{i}" for i in range(n)],
        created_at=created or [f"2023-01-0{i + 1}T00:00:00Z" for i in range(n)],
        texts=texts,
        vectors=vectors,
        query_vector=np.asarray(query_vector if query_vector is not None else vectors[0], np.float32),
    )


def test_fts_query_quotes_every_token_and_doubles_quotes_and_backslashes():
    assert fts_and_query('  say "hi"  to\\me ') == '"say" """hi""" "to\\\\me"'
    assert fts_or_query("a b") == '"a" OR "b"'
    assert fts_and_query("   ") == ""


def test_bm25_and_finds_nothing_when_a_word_is_missing_but_or_finds_it():
    persona = make_persona(
        ["user: I adopted a cat named Luna", "user: sunny weather today"], query="What is the name of my cat?"
    )
    index = Bm25Index(persona)
    try:
        assert index.search(fts_and_query(persona.question), 50) == []
        hits = index.search(fts_or_query(persona.question), 50)
        assert [rid for rid, _ in hits][0] == "q1::s0"
        assert index.search(fts_and_query("cat named Luna"), 50)[0][0] == "q1::s0"
    finally:
        index.close()


def test_bm25_porter_stemming_matches_inflections():
    persona = make_persona(["user: we were running marathons", "user: nothing here"])
    index = Bm25Index(persona)
    assert [rid for rid, _ in index.search(fts_and_query("run marathon"), 50)] == ["q1::s0"]


def test_bm25_statistics_are_per_persona():
    # A word frequent in this persona's rows scores lower than a rare one: the IDF is local.
    common = make_persona(["apple pear"] * 5 + ["apple kiwi"])
    index = Bm25Index(common)
    scores = dict(index.search(fts_or_query("pear kiwi"), 50))
    assert scores["q1::s5"] > scores["q1::s0"]


def test_candidate_pool_is_clamped_like_vipune():
    assert candidate_pool(1) == 50
    assert candidate_pool(10) == 100
    assert candidate_pool(5000) == 10_000


def test_rrf_uses_k25_and_breaks_ties_to_the_smaller_id():
    semantic = [("m1", 0.9), ("m3", 0.8), ("m2", 0.7)]
    bm25 = [("m2", 5.0), ("m3", 4.0), ("m1", 3.0)]
    fused = rrf([semantic, bm25], 10)
    assert [rid for rid, _ in fused] == ["m1", "m2", "m3"]  # m1 and m2 tie at 1/26 + 1/28
    assert fused[0][1] == pytest.approx(1 / 26 + 1 / 28)
    assert fused[2][1] == pytest.approx(2 / 27)
    assert rrf([semantic, []], 2) == [("m1", pytest.approx(1 / 26)), ("m3", pytest.approx(1 / 27))]


def test_dense_orders_by_cosine_and_ties_go_to_the_newer_row():
    vectors = [[1, 0], [1, 0], [0.6, 0.8], [0, 1]]
    persona = make_persona(
        ["a", "b", "c", "d"],
        vectors=vectors,
        query_vector=[1, 0],
        created=["2023-01-01T00:00:00Z", "2023-02-01T00:00:00Z", "2023-01-01T00:00:00Z", "2023-01-01T00:00:00Z"],
    )
    ranking = dense(persona, 3)
    assert [rid for rid, _ in ranking] == ["q1::s1", "q1::s0", "q1::s2"]
    assert ranking[2][1] == pytest.approx(0.6)


def test_hybrid_falls_back_to_semantic_order_when_bm25_is_empty():
    vectors = np.random.default_rng(0).normal(size=(8, 16)).astype(np.float32)
    persona = make_persona(
        [f"text number {i}" for i in range(8)], vectors=vectors, query="zebra unicorn", query_vector=vectors[3]
    )
    out = search_persona(persona, ["dense", "bm25", "hybrid"], limit=5)
    assert out["bm25"] == []
    assert [r for r, _ in out["hybrid"]] == [r for r, _ in out["dense"]]
    assert len(out["hybrid"]) == 5


def test_hybrid_or_promotes_a_row_found_by_both_arms():
    vectors = np.eye(6, 6, dtype=np.float32)
    query_vector = np.array([1, 0.9, 0, 0, 0, 0], np.float32)  # s0 first, s1 second semantically
    persona = make_persona(
        ["alpha", "beta gamma", "delta", "eps", "zeta", "eta"],
        vectors=vectors,
        query="gamma omega",
        query_vector=query_vector,
    )
    out = search_persona(persona, ["hybrid", "hybrid-or", "bm25-or"], limit=3)
    assert out["bm25-or"][0][0] == "q1::s1"
    assert out["hybrid-or"][0][0] == "q1::s1"
    assert out["hybrid"][0][0] == "q1::s0"


# 384 dimensions as bge-small's; an odd count puts each row at another alignment in memory
DUPLICATED = [duplicated_haystack(seed, sessions) for seed, sessions in enumerate(range(3, 40))] + [
    duplicated_haystack(seed, sessions, dims)
    for seed, (sessions, dims) in enumerate([(9, 3), (11, 7), (13, 33), (21, 385)])
]


@pytest.mark.parametrize("persona", DUPLICATED, ids=lambda p: f"{len(p.row_ids)}x{p.vectors.shape[1]}")
def test_byte_identical_rows_score_the_same_and_rank_in_import_order(persona):
    """Issue 44 item 3: a matrix product scored a copy past the BLAS block's last multiple with
    other last bits than its original, so dense ranked the copy first where vipune (row by row,
    a stable sort: import order) ranks the original first."""
    half = len(persona.row_ids) // 2
    ranking = dense(persona, len(persona.row_ids))
    score = dict(ranking)
    place = {rid: i for i, (rid, _) in enumerate(ranking)}
    for i in range(half):
        original, copy = persona.row_ids[i], persona.row_ids[half + i]
        assert score[original] == score[copy]
        assert place[original] < place[copy]
