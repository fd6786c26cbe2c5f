"""bm25-lme, LongMemEval's own BM25 (issue 22): the same rank_bm25 calls as its
run_retrieval.py flat-bm25, so the same order, ties included; and the official view's two
question sets (`metrics`: run_retrieval.py's skip rule; `metrics_all`: every non-abstention pair)."""

import json

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from vipune_eval.registry import retrievers as registry
from vipune_eval.errors import EvalError
from vipune_eval.core.persona import Persona
from support.search import search_persona
from vipune_eval.stages.search.arms import persona_arms, write_arms
from vipune_eval.stages.search.fuse import run_fuse


def lme_order(corpus, question, n):
    """run_retrieval.py's flat-bm25, spelled out."""
    bm25 = BM25Okapi([doc.split(" ") for doc in corpus])
    scores = bm25.get_scores(question.split(" "))
    return list(np.argsort(scores)[::-1][:n])


def persona(seed):
    rng = np.random.default_rng(seed)
    words = "i adopted luna she is grey the cat dog walk park".split()
    texts = [" ".join(rng.choice(words, size=rng.integers(0, 8))) for _ in range(25)]
    texts += texts[:5]  # exact repeats: tied scores
    n = len(texts)
    return Persona(question_id="q", question=" ".join(rng.choice(words, size=3)) + "  ?",
                   row_ids=[f"q::s{i}" for i in range(n)], session_ids=[f"s{i}" for i in range(n)],
                   created_at=["2023-01-01T00:00:00Z"] * n, texts=texts,
                   vectors=rng.normal(size=(n, 4)).astype(np.float32),
                   query_vector=rng.normal(size=4).astype(np.float32))


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


def test_fusing_refuses_a_persona_family(tmp_path):
    write_arms(tmp_path / "arms.parquet", [persona_arms(persona(0))])
    with pytest.raises(EvalError, match="not a family setting fused from the arms"):
        run_fuse([tmp_path / "arms.parquet"], "bm25-lme", 10, 10, [tmp_path / "out.run"])


# ---------------------------------------------------------------- the official view (slow)


def lme_corpus(entry):
    """LongMemEval's session corpus of one instance, from the dataset JSON alone: keys are the
    user turns joined by a space, ids holding 'answer' become 'noans' without user-side evidence."""
    ids, corpus = [], []
    for sid, session in zip(entry["haystack_session_ids"], entry["haystack_sessions"]):
        users = [t for t in session if t["role"] == "user"]
        if "answer" in sid and not any(bool(t.get("has_answer")) for t in users):
            sid = sid.replace("answer", "noans")
        ids.append(sid)
        corpus.append(" ".join(t["content"] for t in users))
    return ids, corpus


@pytest.mark.slow
def test_official_view_bm25_lme_and_both_question_sets(finished_run, scenario_inputs):
    from test_workflow import read_run

    workdir, _ = finished_run("official-bm25-lme")
    data, _ = scenario_inputs("official-bm25-lme")

    entries = [e for e in json.loads(data.read_text()) if not e["question_id"].endswith("_abs")]
    evidence = {e["question_id"] for e in entries
                if any(t.get("has_answer") for s in e["haystack_sessions"] for t in s if t["role"] == "user")}
    assert 0 < len(evidence) < len(entries)  # the two question sets differ

    # Every non-abstention pair is searched, and bm25-lme is rank_bm25 recomputed on each.
    ranked = read_run(workdir / "results/official/runs/bm25-lme.run")
    assert set(ranked) == {e["question_id"] for e in entries}
    for e in entries:
        ids, corpus = lme_corpus(e)
        assert ranked[e["question_id"]] == [ids[i] for i in lme_order(corpus, e["question"], 50)], e["question_id"]

    report = json.loads((workdir / "results/report.json").read_text())
    official = report["official"]
    assert official["pairs"] == len(evidence) and official["pairs_all"] == len(entries)
    for name in ("dense", "bm25-lme"):
        m = json.loads((workdir / f"results/official/metrics/{name}.json").read_text())
        rows = m["per_query"]
        assert {q for q, r in rows.items() if r["averaged"]} == evidence
        assert m["pairs"] == len(evidence) and m["pairs_all"] == len(entries)
        for key in m["metrics"]:
            assert m["metrics"][key] == pytest.approx(np.mean([rows[q][key] for q in evidence]))
            assert m["metrics_all"][key] == pytest.approx(np.mean([r[key] for r in rows.values()]))
        assert any(m["metrics"][k] != pytest.approx(m["metrics_all"][k]) for k in m["metrics"])
        assert official["retrievers"][name]["metrics_all"] == m["metrics_all"]

    # generated data is not the paper's corpus (issue 32, case 1): the published row is shown, ours
    # is not set beside it as comparable, and the report says why
    assert official["beside_published"] == {}
    assert report["corpus"]["release"] == "local" and not report["corpus"]["same_as_paper"]
    md = (workdir / "results/report.md").read_text()
    assert "| BM25 (rank_bm25), published |" in md and "(LongMemEval's BM25), `metrics_all`" not in md
    assert "Not set beside our numbers: this run scored a file (a local file that is none of the pinned releases" in md
    assert "`metrics_all`: every non-abstention pair" in md
