"""stages/report/sections/by_view.py: the views beside the primary one."""

from __future__ import annotations

from support.report import (
    RANKED,
    add_view,
    markdown_of,
    metrics,
)
from vipune_eval.core.failed_pair import failed_pair
from vipune_eval.stages.report.document import cell
from vipune_eval.stages.report.report import build
from vipune_eval.stages.report.sections.by_view import granularities_section


def test_the_official_views_recall_all_convention_is_explained(loaded):
    report = build(loaded)
    session = report["views"]["session"]
    official = {
        **session,
        "protocol": "official",
        "description": "LongMemEval's protocol",
        "measures": {"recall_any": "…", "recall_all": "…"},
        "summary": {
            **session["summary"],
            "pairs_all": 8,
            "skipped_without_user_side_evidence": 3,
            "skip_rule": "run_retrieval.py's",
            "pairs_with_empty_gold": 0,
        },
        "retrievers": {
            n: {**e, "metrics_all": e["metrics"], "intervals_all": e["intervals"], "pairs_all": 8}
            for n, e in session["retrievers"].items()
        },
    }
    report["views"]["official"] = official
    text = markdown_of(report)
    assert (
        "`metrics_all` holds the 3 pairs without user-side evidence, every one with no gold, so there "
        "recall_all can exceed recall_any" in text
    )


def test_a_granularity_where_a_retriever_failed_a_pair_says_every_cells_pair_count(loaded, tmp_path):
    """Issue 44.1: the turn view's vipune-lib scored 7 of its 8 pairs; its cell and vipune's say how
    many pairs each averages (the session row, where nothing failed, says nothing more)."""
    refused = failed_pair("persona q3: vipune-lane: Input too long", None, "Input too long")
    loaded.manifest["retrievers"] = ["dense", "hybrid", "vipune", "vipune-lib"]
    loaded.views[0].metrics["vipune-lib"] = metrics(tmp_path / "session", "vipune-lib", ranked=RANKED["vipune"])
    add_view(
        loaded,
        "turn",
        {
            "vipune": metrics(tmp_path / "turn", "vipune"),
            "vipune-lib": metrics(tmp_path / "turn", "vipune-lib", {"q3": refused}, RANKED["vipune"]),
        },
    )
    report = build(loaded)
    [section] = granularities_section(report)
    table = section.blocks[0]
    assert table.columns == [
        "granularity",
        "rows",
        "unique texts",
        "tokens embedded",
        "vipune",
        "vipune-lib",
        "dense",
        "hybrid",
    ]
    rows = {row[0]: dict(zip(table.columns[4:], row[4:])) for row in table.rows}
    turn = report["granularities"]["turn"]["retrievers"]
    assert rows["turn"] == {
        n: cell(turn[n]["metrics"]["recall@5"], turn[n]["intervals"]["recall@5"]) + f" ({p} pairs)"
        for n, p in (("vipune", 8), ("vipune-lib", 7))
    } | {"dense": "–", "hybrid": "–"}
    assert not any("pairs)" in c for c in rows["session"].values())
