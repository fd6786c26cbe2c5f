"""stages/report/sections/agreement.py: vipune's lanes against their mirrors and each other."""

from __future__ import annotations

import json

from support.report import (
    RANKED,
    add_view,
    markdown_of,
    metrics,
)
from vipune_eval.core.failed_pair import failed_pair
from vipune_eval.stages.report.report import build
from vipune_eval.stages.report.sections import agreement


def test_the_summary_names_the_lane_build_and_report_md_lists_where_the_lanes_differ(loaded):
    """Issue 37: the lib lane's build (the vipune source it was built from, a release or a checkout
    with its git description) is named in summary.txt's first lines and report.md's; every pair
    where the lib lane and the binary rank differently is named, never averaged away."""
    from support.report import summary_of

    primary, lane = "0.20.2-aaaaaaaaaaaa", "0.20.2-cccccccccccc"
    loaded.manifest.update(primary=primary, retrievers=["dense", "hybrid", "vipune", "vipune-lib"])
    loaded.fingerprints = {primary: {"id": primary, "version": "0.20.2", "sha256": "aa" * 32}}
    loaded.preflights = {primary: {}}
    loaded.lanes = {
        primary: {
            "id": lane,
            "sha256": "cc" * 32,
            "version": "0.20.2",
            "binary": primary,
            "built": {"vipune_source": "checkout /src/vipune (v0.20.2-3-gabc1234-dirty)", "lane_source": "ee" * 32},
        }
    }
    lib = json.loads(json.dumps(loaded.views[0].metrics["vipune"]))  # the binary's, but for one pair
    lib["per_query"]["q3"]["ranked"] = list(reversed(lib["per_query"]["q3"]["ranked"]))
    loaded.views[0].metrics["vipune-lib"] = lib
    report = build(loaded)
    line = (
        f"vipune-lane {lane} (sha256 cccccccccccc): vipune's search code from checkout /src/vipune "
        f"(v0.20.2-3-gabc1234-dirty), beside build {primary}, lane/ sources eeeeeeeeeeee"
    )
    assert f"  {line}" in summary_of(report).splitlines()[1:4]
    assert f"- {line}\n" in markdown_of(report)
    [agree] = report["diagnostics"]["lanes"]
    assert (agree["run"], agree["mirror"], agree["differ_top10"]) == ("vipune-lib", "vipune", ["q3"])
    assert "they differ on 1: q3." in markdown_of(report)
    assert any("vipune-lib" in w and "q3" in w for w in summary_of(report).splitlines())


def test_a_lane_is_one_entry_of_the_lanes_table(loaded, tmp_path, monkeypatch):
    """vipune-lib (vipune's code through vipune-lane) is a Lane: first in the headline and marked
    in the HTML, set against the binary's run it must rank as; a pair where they differ is named in
    report.md's diagnostics and the summary's warnings."""
    from support.report import summary_of
    from vipune_eval.registry import lanes
    from vipune_eval.stages.report import report_page as html
    from vipune_eval.stages.report.sections.contents import document

    assert "vipune-lib" in lanes.RUNS
    monkeypatch.setitem(RANKED, "vipune-lib", [1, 1, 2, 3, None, 1, 1, 1])  # q7's gold at 1, not 6
    loaded.views[0].metrics["vipune-lib"] = metrics(tmp_path, "vipune-lib")
    loaded.manifest["retrievers"] = ["dense", "vipune-lib", "hybrid", "vipune"]
    report = build(loaded)
    assert report["retriever_order"] == ["vipune-lib", "vipune", "dense", "hybrid"]
    [lane] = report["diagnostics"]["lanes"]
    assert (lane["run"], lane["mirror"], lane["differ_top10"]) == ("vipune-lib", "vipune", ["q7"])
    assert (
        "vipune-lib (vipune's own search code through vipune-lane, on the cached query vectors) and vipune "
        "(the binary, with its model) return the same ranking on" in markdown_of(report)
    )
    assert "they differ on 1: q7." in markdown_of(report)
    assert (
        "vipune-lib (vipune's code, cached vectors) and vipune (the binary) rank 1 of 8 pairs differently: q7"
        in summary_of(report)
    )
    front = html.front(document(report), {})
    assert front.count("<tr class=vipune>") == 2 and "<tr class=vipune><td>vipune-lib</td>" in front


def test_lanes_that_scored_different_pairs_say_their_counts_and_the_warnings_name_every_pair(loaded, tmp_path):
    """Issue 43.4: the binary refused q1 and q2 (exit 3), vipune-lib ranked them: both lanes' rows say
    their pair count, and the warnings and the diagnostics name every pair one lane scored and the
    other did not (the two runs of each lane in one line)."""
    from vipune_eval.stages.report.sections.contents import document

    refused = failed_pair("persona q…: … exited 3: …", 3, "content exceeds 512-token embedding limit")
    failed = {"q1": refused, "q2": refused}
    runs = {
        "vipune": metrics(tmp_path / "v", "vipune", failed),
        "vipune-semantic": metrics(tmp_path / "v", "vipune-semantic", failed, RANKED["dense"]),
        "vipune-lib": metrics(tmp_path / "v", "vipune-lib", ranked=RANKED["vipune"]),
        "vipune-lib-semantic": metrics(tmp_path / "v", "vipune-lib-semantic", ranked=RANKED["dense"]),
    }
    loaded.views[0].metrics.update(runs)
    loaded.manifest["retrievers"] = ["dense", "hybrid", *runs]
    report = build(loaded)
    doc = document(report)
    pairs = {row[0]: row[1] for row in doc.headline.rows}
    assert [pairs[n] for n in runs] == ["6 (2 failed)", "6 (2 failed)", "8", "8"]
    assert (
        "vipune and vipune-semantic scored 6 pairs, vipune-lib and vipune-lib-semantic 8: q1, q2 only in "
        "vipune-lib and vipune-lib-semantic (their averages are over different pairs)"
    ) in doc.warnings
    assert (
        "return the same ranking on top 1: 100.0%, top 5: 100.0%, top 10: 100.0% of 6 pairs. vipune scored 6 "
        "pairs, vipune-lib 8: q1, q2 only in vipune-lib." in markdown_of(report)
    )


def test_the_lanes_are_compared_in_every_view(loaded, tmp_path):
    """Issue 44.1: diagnostics.lanes compared the session view only. In the turn view vipune-lib ranks
    q7 otherwise than the binary: report.json, report.md's diagnostics and the warnings say so,
    naming the view."""
    from vipune_eval.stages.report.sections.contents import document

    loaded.manifest["retrievers"] = ["dense", "hybrid", "vipune", "vipune-lib"]
    loaded.views[0].metrics["vipune-lib"] = metrics(tmp_path / "session", "vipune-lib", ranked=RANKED["vipune"])
    add_view(
        loaded,
        "turn",
        {
            "vipune": metrics(tmp_path / "turn", "vipune"),
            "vipune-lib": metrics(tmp_path / "turn", "vipune-lib", ranked=[1, 1, 2, 3, None, 1, 1, 1]),
        },
    )
    add_view(
        loaded,
        "chunk",
        {
            "vipune": metrics(tmp_path / "chunk", "vipune"),
            "vipune-lib": metrics(tmp_path / "chunk", "vipune-lib", ranked=RANKED["vipune"]),
        },
    )
    report = build(loaded)
    assert [(a["view"], a["run"], a["mirror"], a["differ_top10"]) for a in report["diagnostics"]["lanes"]] == [
        ("session", "vipune-lib", "vipune", []),
        ("turn", "vipune-lib", "vipune", ["q7"]),
        ("chunk", "vipune-lib", "vipune", []),
    ]
    lines = markdown_of(report).splitlines()
    assert (
        "- turn view: vipune-lib and vipune return the same top 10 on 87.5% of 8 pairs; they differ on 1: q7." in lines
    )
    assert (
        "- vipune-lib returns the same ranking as vipune on every pair of the chunk view (to the largest k of each)."
    ) in lines
    assert (
        "vipune-lib (vipune's code, cached vectors) and vipune (the binary) rank 1 of 8 pairs differently in "
        "the turn view: q7 (report.md, Diagnostics); "
    ) in "\n".join(document(report).warnings)
    ranked = agreement.ranked_differently(report)
    assert len(ranked) == 1 and ranked[0].startswith("vipune-lib (vipune's code") and not agreement.scored_apart(report)


def test_the_same_pairs_apart_in_several_views_are_one_warning_naming_the_views(loaded, tmp_path):
    from vipune_eval.stages.report.sections.contents import document

    refused = failed_pair("persona q1: … exited 3: …", 3, "content exceeds 512-token embedding limit")
    loaded.manifest["retrievers"] = ["dense", "hybrid", "vipune", "vipune-lib"]
    loaded.views[0].metrics.update(
        vipune=metrics(tmp_path / "session", "vipune", {"q1": refused}),
        **{"vipune-lib": metrics(tmp_path / "session", "vipune-lib", ranked=RANKED["vipune"])},
    )
    add_view(
        loaded,
        "turn",
        {
            "vipune": metrics(tmp_path / "turn", "vipune", {"q1": refused}),
            "vipune-lib": metrics(tmp_path / "turn", "vipune-lib", ranked=RANKED["vipune"]),
        },
    )
    report = build(loaded)
    apart = [w for w in document(report).warnings if " scored " in w]
    assert apart == [
        "vipune scored 7 pairs, vipune-lib 8 in the session and turn views: q1 only in vipune-lib "
        "(their averages are over different pairs)"
    ]
    # the gate's notes take the lanes' rankings alone (agreement.ranked_differently): none differ here
    assert agreement.scored_apart(report) == apart and agreement.ranked_differently(report) == []


def test_the_warning_says_why_the_lanes_differ_where_the_harness_can_tell(loaded):
    """Issue 52 item 2: lanes that rank a pair differently are named with the cause the harness
    knows (a stale copy in the vipune-lane; the binary's query vectors no longer the cached ones; a
    preflight check it fails) and what it means for each lane; else, that it cannot tell."""
    from vipune_eval.stages.report.sections.contents import document

    primary = "0.20.2-aaaaaaaaaaaa"
    loaded.manifest.update(primary=primary, retrievers=["dense", "hybrid", "vipune", "vipune-lib"])
    loaded.fingerprints = {primary: {"id": primary, "version": "0.20.2", "sha256": "aa" * 32}}
    loaded.preflights = {primary: {"checks": [{"check": "embedding_parity", "passed": True}]}}
    lib = json.loads(json.dumps(loaded.views[0].metrics["vipune"]))
    lib["per_query"]["q3"]["ranked"] = list(reversed(lib["per_query"]["q3"]["ranked"]))
    loaded.views[0].metrics["vipune-lib"] = lib
    stale = {
        "file": "src/commands/mod.rs",
        "item": "fn execute",
        "what": "the dispatch",
        "copied_to": "x",
        "pinned": ["1" * 64],
        "source": "2" * 64,
        "same": False,
    }
    lane = {
        "id": "0.20.2-cccccccccccc",
        "sha256": "cc" * 32,
        "version": "0.20.2",
        "binary": primary,
        "built": {"sources": {"compiled": [], "copies": [{**stale, "same": True}]}},
    }
    loaded.lanes = {primary: lane}

    def warning() -> str:
        [line] = [w for w in document(build(loaded)).warnings if "rank 1 of 8 pairs differently" in w]
        return line.split("(report.md, Diagnostics); ")[1]

    assert warning().startswith(
        "the harness cannot tell why (no copy in vipune-lib is stale, the binary's query "
        "vectors are the cached ones): an edit outside the path"
    )
    lane["built"]["sources"]["copies"] = [stale]
    assert warning() == (
        "why: vipune-lib does not run this source's `fn execute` from src/commands/mod.rs (a stale "
        "copy: the binary's lists follow that edit, vipune-lib's do not)"
    )
    lane["built"]["sources"]["copies"] = []
    loaded.preflights[primary]["checks"].append(
        {
            "check": "query_embedding_parity",
            "passed": False,
            "seen": "min cosine 0.931000 over 3 questions",
            "drift": "the query's embedding differs: …",
        }
    )
    assert warning() == (
        "why: the binary's query vectors are no longer the cached ones (its preflight's "
        "query_embedding_parity: min cosine 0.931000 over 3 questions): the binary ranks with its "
        "new query embedding, vipune-lib with the cached vectors"
    )


def test_a_lane_and_its_mirror_with_no_pair_in_common_are_said_so_not_a_crash(loaded, tmp_path):
    """diagnostics.agreement writes a share of None where the binary and its mirror scored no pair
    in common (every pair of one failed, vipune.on_error: record); the diagnostics formatted it as a
    percentage and the warnings subtracted it from 1, both a TypeError (found by mypy, issue 53)."""
    from vipune_eval.stages.report.report_json import primary_ks
    from vipune_eval.stages.report.sections import agreement

    report = build(loaded)
    agree = report["diagnostics"]["vipune_vs_hybrid"]
    assert agree is not None
    ks = primary_ks(report)
    for k in ks:
        agree[f"same_top{k}_share"] = None  # as diagnostics.agreement writes it for no pair in common
    agree["pairs"] = 0
    [line] = [i.text for i in agreement.items(report) if i.text.startswith("vipune and its mirror")]
    assert "top 1: no pair, top 5: no pair, top 10: no pair of 0 pairs" in line
    assert not any(w.startswith("vipune and its mirror") for w in agreement.disagreements(report))
