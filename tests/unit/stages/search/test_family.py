"""bm25-lme, LongMemEval's own BM25 (issue 22): the same rank_bm25 calls as its
run_retrieval.py flat-bm25, so the same order, ties included (the official view's two question
sets through the workflow: tests/workflow/test_official_bm25_lme.py)."""

import numpy as np
import pytest

from support.results import lme_order
from support.search import search_persona
from vipune_eval.core.persona import Persona
from vipune_eval.errors import EvalError
from vipune_eval.registry import retrievers as registry


def persona(seed):
    rng = np.random.default_rng(seed)
    words = "i adopted luna she is grey the cat dog walk park".split()
    texts = [" ".join(rng.choice(words, size=rng.integers(0, 8))) for _ in range(25)]
    texts += texts[:5]  # exact repeats: tied scores
    n = len(texts)
    return Persona(
        question_id="q",
        question=" ".join(rng.choice(words, size=3)) + "  ?",
        row_ids=[f"q::s{i}" for i in range(n)],
        session_ids=[f"s{i}" for i in range(n)],
        created_at=["2023-01-01T00:00:00Z"] * n,
        texts=texts,
        vectors=rng.normal(size=(n, 4)).astype(np.float32),
        query_vector=rng.normal(size=4).astype(np.float32),
    )


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("limit,rank_all", [(10, False), (50, True)])
def test_bm25_lme_is_rank_bm25_itself(seed, limit, rank_all):
    p = persona(seed)
    got = [rid for rid, _ in search_persona(p, ["bm25-lme"], limit, rank_all)["bm25-lme"]]
    want = lme_order(p.texts, p.question, len(p.texts) if rank_all else limit)
    assert got == [p.row_ids[i] for i in want]


def test_bm25_lme_is_a_preset_of_a_persona_family():
    spec = registry.spec("bm25-lme")
    assert spec.use == "bm25-lme" and spec.kind is registry.Kind.PERSONA
    assert registry.spec("hybrid").kind is registry.Kind.ARMS and "bm25-lme" not in registry.DEFAULT
    with pytest.raises(EvalError, match="unknown family 'bm25-lmee'.*bm25-lme"):
        registry.spec({"name": "x", "use": "bm25-lmee"})
