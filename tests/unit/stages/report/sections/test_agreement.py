"""stages/report/sections/agreement.py: vipune's lanes against their mirrors and each other."""

from __future__ import annotations

import json

from vipune_eval.stages.report.build import build
from vipune_eval.stages.report.markdown import render

from support.report import RANKED, metrics
from support.report import loaded  # noqa: F401 (the fixture)


def test_the_summary_names_the_lane_build_and_report_md_lists_where_the_lanes_differ(loaded):
    """Issue 37: the lib lane's build (the vipune source it was built from, a release or a checkout
    with its git description) is named in summary.txt's first lines and report.md's; every pair
    where the lib lane and the binary rank differently is named, never averaged away."""
    from vipune_eval.stages.report import summary

    primary, lane = "0.20.2-aaaaaaaaaaaa", "0.20.2-cccccccccccc"
    loaded.manifest.update(primary=primary, retrievers=["dense", "hybrid", "vipune", "vipune-lib"])
    loaded.fingerprints = {primary: {"id": primary, "version": "0.20.2", "sha256": "aa" * 32}}
    loaded.preflights = {primary: {}}
    loaded.lane = {"id": lane, "sha256": "cc" * 32, "version": "0.20.2", "binary": primary,
                   "built": {"vipune_source": "checkout /src/vipune (v0.20.2-3-gabc1234-dirty)", "lane_source": "ee" * 32}}
    lib = json.loads(json.dumps(loaded.views[0].metrics["vipune"]))  # the binary's, but for one pair
    lib["per_query"]["q3"]["ranked"] = list(reversed(lib["per_query"]["q3"]["ranked"]))
    loaded.views[0].metrics["vipune-lib"] = lib
    report = build(loaded)
    line = (f"vipune-lane {lane} (sha256 cccccccccccc): vipune's search code from checkout /src/vipune "
            f"(v0.20.2-3-gabc1234-dirty), beside build {primary}, lane/ sources eeeeeeeeeeee")
    assert f"  {line}" in summary.render(report).splitlines()[1:4]
    assert f"- {line}\n" in render(report)
    [agree] = report["diagnostics"]["lanes"]
    assert (agree["run"], agree["mirror"], agree["differ_top10"]) == ("vipune-lib", "vipune", ["q3"])
    assert "they differ on 1: q3." in render(report)
    assert any("vipune-lib" in w and "q3" in w for w in summary.render(report).splitlines())


def test_a_lane_is_one_entry_of_the_lanes_table(loaded, tmp_path, monkeypatch):
    """vipune-lib (vipune's code through vipune-lane) is a Lane: first in the headline and marked
    in the HTML, set against the binary's run it must rank as; a pair where they differ is named in
    report.md's diagnostics and the summary's warnings."""
    from vipune_eval.stages.report import lanes, summary
    from vipune_eval.stages.report import report_page as html
    from vipune_eval.stages.report.sections.contents import document

    assert "vipune-lib" in lanes.NAMES
    monkeypatch.setitem(RANKED, "vipune-lib", [1, 1, 2, 3, None, 1, 1, 1])  # q7's gold at 1, not 6
    loaded.views[0].metrics["vipune-lib"] = metrics(tmp_path, "vipune-lib")
    loaded.manifest["retrievers"] = ["dense", "vipune-lib", "hybrid", "vipune"]
    report = build(loaded)
    assert report["retriever_order"] == ["vipune-lib", "vipune", "dense", "hybrid"]
    [lane] = report["diagnostics"]["lanes"]
    assert (lane["run"], lane["mirror"], lane["differ_top10"]) == ("vipune-lib", "vipune", ["q7"])
    assert "vipune-lib (vipune's own search code through vipune-lane, on the cached query vectors) and vipune " \
           "(the binary, with its model) return the same ranking on" in render(report)
    assert "they differ on 1: q7." in render(report)
    assert "vipune-lib (vipune's code, cached vectors) and vipune (the binary) rank 1 of 8 pairs differently: q7" \
           in summary.render(report)
    front = html.front(document(report), {})
    assert front.count("<tr class=vipune>") == 2 and "<tr class=vipune><td>vipune-lib</td>" in front
