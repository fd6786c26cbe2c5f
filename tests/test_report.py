"""The report without Snakemake (issue 28): ``build`` turns hand-made loaded inputs into the report
(no file read), ``render`` turns a report into Markdown. The metrics come from the score stage's
own function on a small hand-made run, so their shape is the real one."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vipune_eval.stages.embed.tally import Tally
from vipune_eval.stages.filter.pairs import PAIRS_SCHEMA
from vipune_eval.stages.report.build import Loaded, View, build
from vipune_eval.stages.report.markdown import render
from vipune_eval.stages.score import run_score

KS = [1, 5, 10]
MEASURES = ["recall", "recall_any", "recall_all", "ndcg", "mrr"]
GOLD = {f"q{i}": [f"g{i}"] for i in range(8)}
CATEGORY = {f"q{i}": ("temporal-reasoning" if i < 6 else "multi-session") for i in range(8)}
RANKED = {  # per retriever: the rank of each pair's gold session (None: not retrieved)
    "vipune": [1, 1, 2, 3, None, 1, 1, 6],
    "hybrid": [1, 1, 2, 3, None, 1, 1, 6],
    "dense": [2, 1, 4, None, None, 1, 3, 1],
}


def metrics(tmp_path, name: str) -> dict:
    pairs = tmp_path / "pairs.parquet"
    pq.write_table(pa.Table.from_pylist([
        {"question_id": q, "question_type": CATEGORY[q], "question": "?", "question_date": "", "split":
         "dev" if q in ("q0", "q1") else "test", "gold": g, "gold_source": "answer_session_ids",
         "session_ids": [*g, "x"], "user_side_evidence": True} for q, g in GOLD.items()], schema=PAIRS_SCHEMA), pairs)
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 {g[0]} 1\n" for q, g in GOLD.items()))
    run = tmp_path / f"{name}.in.run"
    lines = []
    for (q, g), rank in zip(GOLD.items(), RANKED[name]):
        docs = [f"{q}-filler{n}" for n in range(9)]
        if rank is not None:
            docs.insert(rank - 1, g[0])
        lines += [f"{q} Q0 {d} {r} {100 - r} {name}" for r, d in enumerate(docs[:10], 1)]
    run.write_text("\n".join(lines) + "\n")
    run_score(qrels, pairs, [run], KS, MEASURES, name, tmp_path / f"{name}.run", tmp_path / f"{name}.json")
    return json.loads((tmp_path / f"{name}.json").read_text())


@pytest.fixture
def loaded(tmp_path) -> Loaded:
    m = {name: metrics(tmp_path, name) for name in RANKED}
    entry = {"name": "session", "folder": "", "protocol": "seed", "granularity": "session",
             "description": "seed protocol, session rows", "ks": KS, "measures": MEASURES,
             "qrels": "results/filter/qrels.txt", "builds": {}}
    summary = {"pairs": 8, "instances": 9, "abstention": 1, "per_category": {"multi-session": 2, "temporal-reasoning": 6},
               "split": {"seed": 0, "dev_fraction": 0.25, "dev": 2, "test": 6}}
    manifest = {"views": [entry], "settings": {}, "corpus": None, "primary": None, "builds": [], "baseline": None,
                "whatif": None, "mirrors": {"vipune": "hybrid"},
                "roles": {"bm25_and": None, "hybrid_and": "hybrid", "hybrid_or": None}}
    rows = [{"question_id": q, "gold": g, "row_sessions": [g[0], "x"], "row_text_ids": [f"t-{q}", "tx"]}
            for q, g in GOLD.items()]
    return Loaded(manifest=manifest, views=[View(entry, summary, m, {"rows": 16, "unique_texts": 9, "tokens_embedded": 900})],
                  gold={q: set(g) for q, g in GOLD.items()}, rows_with_gold=rows,
                  truncated={**{f"t-{q}": q == "q7" for q in GOLD}, "tx": False},
                  tallies=[Tally(texts=9, tokens=900, squares=90_000, seconds=2.0, threads=2,
                                 shape={"layers": 6, "hidden": 384, "intermediate": 1536})],
                  builds={}, lab={}, fingerprints={}, preflights={},
                  dataset={"kind": "dataset", "sha256": "ab" * 32, "filename": "lme.json"},
                  model={"kind": "model", "repo_id": "m/x", "revision": "r" * 40, "file": "model.onnx",
                         "pooling": "mean", "files": {"model.onnx": "cd" * 32}},
                  config={"model": {"path": "/models/x"}})


def test_build_takes_every_number_from_what_was_loaded(loaded):
    report = build(loaded)
    vipune = loaded.views[0].metrics["vipune"]
    assert report["retrievers"]["vipune"]["metrics"] == vipune["metrics"]
    assert report["retrievers"]["dense"]["metrics"]["recall@1"] == pytest.approx(3 / 8)
    assert set(report["comparisons"]) == {"vipune vs hybrid", "vipune vs dense"}
    assert report["diagnostics"]["vipune_vs_hybrid"]["same_top1_share"] == 1.0
    truncation = report["diagnostics"]["truncation"]
    assert truncation["pairs_with_truncated_gold"] == 1 and truncation["session_texts"] == 9
    assert report["embed"]["texts"] == 9 and report["embed"]["texts_per_s"] == 4.5
    assert report["provenance"]["dataset"] is loaded.dataset and report["builds"] == []
    assert report["splits"]["test"]["pairs"] == 6 and "dev" in report["splits"]


def test_build_reads_no_file(loaded, monkeypatch):
    import builtins

    def refuse(*args, **kwargs):
        raise AssertionError(f"build opened {args[0]}")

    monkeypatch.setattr(builtins, "open", refuse)
    monkeypatch.setattr(pq, "read_table", refuse)
    build(loaded)


def test_render_gives_the_headline_table_and_the_sections(loaded):
    report = build(loaded)
    text = render(report)
    row = next(line for line in text.splitlines() if line.startswith("| vipune |"))
    recall1 = report["retrievers"]["vipune"]["metrics"]["recall@1"]
    assert row.startswith(f"| vipune | 8 | {recall1:.3f} [")
    for heading in ("## Overall (95% intervals in brackets)", "## recall@10 per category",
                    "## Held-out split", "## Paired comparisons", "## Diagnostics", "## Embed throughput"):
        assert heading in text
    assert "**vipune vs dense**" in text


def test_render_of_an_embed_stage_that_computed_nothing(loaded):
    loaded.tallies = [Tally(threads=2, job_seconds=1.5)]
    text = render(build(loaded))
    assert "no embed job timed a text" in text and "1.5 s" in text


def test_the_documents_have_the_declared_shapes(loaded):
    """The metrics file and report.json hold the keys their TypedDicts declare (issue 28)."""
    from vipune_eval.stages.report.build import Report
    from vipune_eval.stages.score import Metrics

    metrics = loaded.views[0].metrics["vipune"]
    assert Metrics.__required_keys__ <= set(metrics) <= set(Metrics.__annotations__)
    report = build(loaded)
    assert set(report) <= set(Report.__annotations__)
    assert set(Report.__annotations__) - set(report) == {"baseline", "whatif", "official"}
