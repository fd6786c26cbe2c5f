"""A hand-made report's inputs (tests/unit/stages/report/): eight pairs, three retrievers ranked as
``RANKED`` says, one view, scored by the score stage's own function so that the metrics' shape is
the real one; ``build(hand_made(tmp_path))`` is its report."""

from __future__ import annotations

import json
from dataclasses import asdict

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vipune_eval.core.failed_pair import FailedPair
from vipune_eval.core.ranking_settings import RankingSettings
from vipune_eval.stages.embed.tally import Tally
from vipune_eval.stages.filter.pairs import PAIRS_SCHEMA
from vipune_eval.stages.report import markdown, summary
from vipune_eval.stages.report.report import Loaded, LoadedView
from vipune_eval.stages.report.sections.contents import document
from vipune_eval.stages.score import Scoring, run_score

KS = [1, 5, 10]
MEASURES = ["recall", "recall_any", "recall_all", "ndcg", "mrr"]
SCORING = Scoring(KS, MEASURES, RankingSettings(10, 10))  # what the hand-made view's runs are made and scored with
GOLD = {f"q{i}": [f"g{i}"] for i in range(8)}
CATEGORY = {f"q{i}": ("temporal-reasoning" if i < 6 else "multi-session") for i in range(8)}
RANKED = {  # per retriever: the rank of each pair's gold session (None: not retrieved)
    "vipune": [1, 1, 2, 3, None, 1, 1, 6],
    "hybrid": [1, 1, 2, 3, None, 1, 1, 6],
    "dense": [2, 1, 4, None, None, 1, 3, 1],
}


def metrics(
    tmp_path, name: str, failed: dict[str, FailedPair] | None = None, ranked: list[int | None] | None = None
) -> dict:
    """``name``'s metrics, as the score stage writes them, from a run ranking each pair's gold
    session as ``ranked`` (default ``RANKED[name]``) says; ``failed``: the pairs its search failed
    (their status file, vipune.on_error: record), left out of its run."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    pairs = tmp_path / "pairs.parquet"
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "question_id": q,
                    "question_type": CATEGORY[q],
                    "question": "?",
                    "question_date": "",
                    "split": "dev" if q in ("q0", "q1") else "test",
                    "gold": g,
                    "gold_source": "answer_session_ids",
                    "session_ids": [*g, "x"],
                    "user_side_evidence": True,
                }
                for q, g in GOLD.items()
            ],
            schema=PAIRS_SCHEMA,
        ),
        pairs,
    )
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 {g[0]} 1\n" for q, g in GOLD.items()))
    run = tmp_path / f"{name}.in.run"
    lines = []
    for (q, g), rank in zip(GOLD.items(), ranked or RANKED[name]):
        if q in (failed or {}):
            continue
        docs = [f"{q}-filler{n}" for n in range(9)]
        if rank is not None:
            docs.insert(rank - 1, g[0])
        lines += [f"{q} Q0 {d} {r} {100 - r} {name}" for r, d in enumerate(docs[:10], 1)]
    run.write_text("\n".join(lines) + "\n")
    status = tmp_path / f"{name}.status.json"
    status.write_text(json.dumps({"failed": failed or {}, "search_seconds": {}}))
    run_score(qrels, pairs, [run], SCORING, name, tmp_path / f"{name}.run", tmp_path / f"{name}.json", status=[status])
    return json.loads((tmp_path / f"{name}.json").read_text())


def hand_made(tmp_path) -> Loaded:
    """The loaded inputs of the hand-made report (its files under ``tmp_path``)."""
    m = {name: metrics(tmp_path, name) for name in RANKED}
    entry = {
        "name": "session",
        "folder": "",
        "protocol": "seed",
        "granularity": "session",
        "description": "seed protocol, session rows",
        "ks": KS,
        "measures": MEASURES,
        "scored_with": asdict(SCORING),
        "qrels": "results/filter/qrels.txt",
        "builds": {},
    }
    summary = {
        "pairs": 8,
        "instances": 9,
        "abstention": 1,
        "per_category": {"multi-session": 2, "temporal-reasoning": 6},
        "split": {"seed": 0, "dev_fraction": 0.25, "dev": 2, "test": 6},
    }
    manifest = {
        "views": [entry],
        "retrievers": ["dense", "hybrid", "vipune"],
        "settings": {},
        "corpus": None,
        "primary": None,
        "builds": [],
        "compared_on": "vipune",
        "baseline": None,
        "whatif": None,
        "mirrors": {"vipune": "hybrid"},
        "searched_by": {},
        "lanes": {},
        "roles": {"bm25_and": None, "hybrid_and": "hybrid", "hybrid_or": None},
    }
    rows = [{"question_id": q, "row_sessions": [g[0], "x"], "row_text_ids": [f"t-{q}", "tx"]} for q, g in GOLD.items()]
    return Loaded(
        manifest=manifest,
        views=[LoadedView(entry, summary, m, {"rows": 16, "unique_texts": 9, "tokens_embedded": 900})],
        gold={q: set(g) for q, g in GOLD.items()},
        rows=rows,
        truncated={**{f"t-{q}": q == "q7" for q in GOLD}, "tx": False},
        tallies=[
            Tally(
                texts=9,
                tokens=900,
                squares=90_000,
                seconds=2.0,
                threads=2,
                shape={"layers": 6, "hidden": 384, "intermediate": 1536},
            )
        ],
        builds={},
        lab={},
        fingerprints={},
        preflights={},
        dataset={"kind": "dataset", "sha256": "ab" * 32, "filename": "lme.json"},
        model={
            "kind": "model",
            "repo_id": "m/x",
            "revision": "r" * 40,
            "file": "model.onnx",
            "pooling": "mean",
            "files": {"model.onnx": "cd" * 32},
        },
        config={"model": {"path": "/models/x"}},
    )


def add_view(loaded: Loaded, name: str, runs: dict[str, dict]) -> None:
    """A second seed view of the same pairs, at granularity ``name`` (its counts the primary's),
    holding ``runs`` (retriever → its metrics)."""
    first = loaded.views[0]
    entry = {
        **first.entry,
        "name": name,
        "folder": f"{name}/",
        "granularity": name,
        "description": f"seed protocol, {name} rows",
    }
    loaded.views.append(LoadedView(entry, first.summary, runs, dict(first.counts)))
    loaded.manifest["views"].append(entry)


def markdown_of(report: dict) -> str:
    """report.md of a report (its document rendered as Markdown)."""
    return markdown.markdown(document(report))


def summary_of(report: dict) -> str:
    """The closing summary of a report (its document as plain text)."""
    return summary.text(document(report))


@pytest.fixture
def loaded(tmp_path) -> Loaded:
    """``hand_made``, for a test module that imports this fixture."""
    return hand_made(tmp_path)
