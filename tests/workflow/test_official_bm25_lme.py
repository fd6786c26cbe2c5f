"""The official view through the Snakemake CLI with bm25-lme, LongMemEval's own BM25: every
non-abstention pair searched, rank_bm25 recomputed on each, and the view's two question sets
(`metrics`: run_retrieval.py's skip rule; `metrics_all`: every non-abstention pair)."""

import json

import numpy as np
import pytest

from support.results import lme_corpus, lme_order, read_run


def test_official_view_bm25_lme_and_both_question_sets(finished_run, scenario_inputs):
    workdir, _ = finished_run("official-bm25-lme")
    data, _ = scenario_inputs("official-bm25-lme")

    entries = [e for e in json.loads(data.read_text()) if not e["question_id"].endswith("_abs")]
    evidence = {
        e["question_id"]
        for e in entries
        if any(t.get("has_answer") for s in e["haystack_sessions"] for t in s if t["role"] == "user")
    }
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
