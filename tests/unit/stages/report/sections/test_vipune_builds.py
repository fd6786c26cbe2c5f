"""stages/report/sections/vipune_builds.py: the builds a run evaluates, their table and lines."""

from __future__ import annotations

from support.report import markdown_of
from vipune_eval.stages.report.report import build


def test_each_build_is_named_with_where_it_came_from(loaded):
    primary, other = "0.20.1-aaaaaaaaaaaa", "0.20.1-bbbbbbbbbbbb"
    loaded.manifest.update(primary=primary, builds=[other])
    loaded.sources = {
        primary: "vipune.binary 'vipune' = /usr/local/bin/vipune",
        other: "vipune.compare '/opt/k60/vipune'",
    }
    loaded.builds = {other: loaded.views[0].metrics["dense"]}
    loaded.fingerprints = {b: {"id": b, "version": "0.20.1", "sha256": b[-12:] * 5} for b in (primary, other)}
    loaded.preflights = {primary: {"follows_contract": True, "failed_checks": []}}
    report = build(loaded)
    assert [b["source"] for b in report["builds"]] == [loaded.sources[primary], loaded.sources[other]]
    text = markdown_of(report)
    assert (
        f"| {primary} (primary) | 0.20.1 | aaaaaaaaaaaa | vipune.binary 'vipune' = /usr/local/bin/vipune | 8 |" in text
    )
    assert f"| {other} | 0.20.1 | bbbbbbbbbbbb | vipune.compare '/opt/k60/vipune' | 8 |" in text
    # the pairs whose gold moved, each with its recall@k before (the compared build, dense: q0's gold
    # at rank 2) → after (vipune.binary's run, vipune: at rank 1) (issue 52: before → after everywhere)
    assert "  - q0 (temporal-reasoning): recall@1 0.00 → 1.00" in text
    assert f"**{other} → {primary}** (before → after; holm over " in text


def test_the_summary_gives_each_build_one_line_and_its_failed_preflight(loaded):
    from support.report import summary_of

    primary, other = "0.20.1-aaaaaaaaaaaa", "0.20.1-bbbbbbbbbbbb"
    loaded.manifest.update(primary=primary, builds=[other])
    loaded.sources = {other: "vipune.compare '/opt/k60/vipune'"}
    loaded.builds = {other: loaded.views[0].metrics["dense"]}
    loaded.fingerprints = {b: {"id": b, "version": "0.20.1", "sha256": b[-12:] * 5} for b in (primary, other)}
    loaded.preflights = {primary: {}, other: {"follows_contract": False, "failed_checks": ["rrf_k25_ranks_from_1"]}}
    report = build(loaded)
    text = summary_of(report)
    r = report["builds"][1]["comparison"]["overall"]["recall@5"]
    assert r["a"] == report["builds"][0]["metrics"]["recall@5"]  # a: after (vipune.binary), b: before
    assert (
        f"  {other} (vipune.compare '/opt/k60/vipune'): vipune recall@5 {r['b']:.3f} → {r['a']:.3f} in "
        f"{primary} ({100 * r['difference']:+.1f} points, unadjusted 95% CI "
    ) in text
    assert f"  ! {other} fails preflight: rrf_k25_ranks_from_1" in text
    # the pairs the build changes, each with its number in that build, then in the primary (issue 43.3):
    # before → after
    changes = report["builds"][1]["changes"]
    assert changes
    for c in changes[:10]:
        key = "recall@5" if "recall@5" in c else next(k for k in c if k.startswith("recall@"))
        assert f"    {c['question_id']} ({c['question_type']}): {key} {c[key][0]:.2f} → {c[key][1]:.2f}" in text


def test_a_moved_pair_reads_before_to_after_in_the_summary_and_report_md_alike(loaded):
    """Issue 51 item 6: the summary gave a moved pair's recall as "1.00 vs 0.00" (the build's, then
    the primary's) and report.md as "0.00 → 1.00" (the primary's → the build's), so in the loop
    report.md's arrows ran checkout → release. Both now read from the compared build (the
    release, vipune.baseline) to vipune.binary (the checkout), and gained@k is what vipune.binary
    gained."""
    from support.report import summary_of

    checkout, release = "0.20.2-aaaaaaaaaaaa", "0.20.2-bbbbbbbbbbbb"
    loaded.manifest.update(primary=checkout, builds=[release])  # the loop: the checkout is vipune.binary
    loaded.builds = {release: loaded.views[0].metrics["dense"]}  # q0: rank 2 in the release, 1 in the checkout
    loaded.fingerprints = {b: {"id": b, "version": "0.20.2", "sha256": b[-12:] * 5} for b in (checkout, release)}
    report = build(loaded)
    q0 = next(c for c in report["builds"][1]["changes"] if c["question_id"] == "q0")
    assert q0["recall@1"] == [0.0, 1.0] and q0["gained@1"] and not q0["lost@1"]
    assert "    q0 (temporal-reasoning): recall@1 0.00 → 1.00" in summary_of(report)
    assert "  - q0 (temporal-reasoning): recall@1 0.00 → 1.00" in markdown_of(report)


def test_the_loop_compares_the_builds_on_the_lib_lane_and_says_so(loaded):
    """With only the lib lane configured, the builds are compared on vipune-lib (plan.builds.compared_on)."""
    from support.report import summary_of

    primary, other = "0.20.2-aaaaaaaaaaaa", "0.20.2-bbbbbbbbbbbb"
    loaded.manifest.update(primary=primary, builds=[other], compared_on="dense")  # any scored run will do here
    loaded.builds = {other: loaded.views[0].metrics["hybrid"]}
    loaded.fingerprints = {b: {"id": b, "version": "0.20.2", "sha256": b[-12:] * 5} for b in (primary, other)}
    report = build(loaded)
    assert (
        report["builds_compared_on"] == "dense" and report["builds"][0]["run"] == report["retrievers"]["dense"]["run"]
    )
    assert f"  {other} (evaluated before): dense recall@5 " in summary_of(report)


def test_a_failed_preflight_reads_the_same_in_the_builds_table_and_the_warnings(loaded):
    """Issue 38: the summary's warning for a build that fails its preflight gives the words of
    report.md's builds table (the drift, where the preflight named it), from one owner."""
    from support.report import summary_of
    from vipune_eval.stages.report import report_page as html
    from vipune_eval.stages.report.sections.contents import document
    from vipune_eval.stages.report.sections.vipune_builds import failed_preflight

    drift = (
        "RRF k differs: same order, other scores (vipune's fused scores fit k = 60; the contract and the "
        "hybrid mirrors use k = 25)"
    )
    primary, other = "0.20.2-aaaaaaaaaaaa", "0.20.2-bbbbbbbbbbbb"
    loaded.manifest.update(primary=primary, builds=[other])
    loaded.builds = {other: loaded.views[0].metrics["vipune"]}
    loaded.fingerprints = {b: {"id": b, "version": "0.20.2", "sha256": b[-12:] * 5} for b in (primary, other)}
    loaded.preflights = {
        primary: {},
        other: {"follows_contract": False, "failed_checks": ["rrf_k25_ranks_from_1"], "drift": [drift]},
    }
    report = build(loaded)
    words = failed_preflight(report["builds"][1])
    assert words == f"fails preflight: {drift}"
    assert f"| {other} — {words} | 0.20.2 |" in markdown_of(report)
    assert f"  ! {other} {words}; its search does not do what the contract says" in summary_of(report)
    assert f"{other} {words}; its search" in html.front(document(report), {})


def test_a_compared_builds_lane_its_checkout_fast_build_and_stale_copies_are_in_every_rendering(loaded):
    """Issue 51 item 3: a build under vipune.compare had no lane provenance: its checkout (git
    describe), "a fast build" and its vipune-lane's stale copies were in no summary, report.md or HTML,
    and report.json's builds[] had no lane; vipune.binary's were named."""
    from support.report import summary_of
    from vipune_eval.stages.report import report_page as html
    from vipune_eval.stages.report.sections.contents import document

    release, checkout = "0.20.2-aaaaaaaaaaaa", "0.20.2-bbbbbbbbbbbb"
    copy = {
        "file": "src/rrf.rs",
        "item": "fn rrf",
        "what": "the fusion",
        "copied_to": "lane/src/copies.rs: rrf",
        "pinned": "1" * 64,
        "source": "2" * 64,
        "same": False,
    }
    lanes = {
        release: {
            "id": "0.20.2-cccccccccccc",
            "sha256": "cc" * 32,
            "version": "0.20.2",
            "binary": release,
            "built": {
                "vipune_source": "vipune 0.20.2 from crates.io",
                "profile": "release",
                "sources": {"compiled": [], "copies": []},
            },
        },
        checkout: {
            "id": "0.20.2-dddddddddddd",
            "sha256": "dd" * 32,
            "version": "0.20.2",
            "binary": checkout,
            "built": {
                "vipune_source": "checkout /src/vipune (v0.20.2-3-gabc1234-dirty)",
                "profile": "fast",
                "sources": {"compiled": [], "copies": [copy]},
            },
        },
    }
    loaded.manifest.update(primary=release, builds=[checkout], compared_on="dense")
    loaded.sources = {
        release: "vipune.binary '/c/vipune-0.20.2/bin/vipune'",
        checkout: "vipune.compare '/c/checkout-vipune/bin/vipune'",
    }
    loaded.builds = {checkout: loaded.views[0].metrics["hybrid"]}
    loaded.fingerprints = {b: {"id": b, "version": "0.20.2", "sha256": b[-12:] * 5} for b in (release, checkout)}
    loaded.lanes = lanes
    report = build(loaded)
    assert [b["lane"] for b in report["builds"]] == [lanes[release], lanes[checkout]]
    assert report["provenance"]["lane"] == lanes[release]
    doc = document(report)
    text, md, front = summary_of(report), markdown_of(report), html.front(doc, {})
    where = (
        "vipune.compare '/c/checkout-vipune/bin/vipune'; its vipune-lane: vipune's search code from checkout "
        "/src/vipune (v0.20.2-3-gabc1234-dirty), a fast build (build.sh --fast: not the release profile's bytes, "
        "the same rankings); 1 copy its source changes"
    )
    assert f"  {checkout} ({where}): dense recall@5 " in text  # the summary's line of the build
    assert "v0.20.2-3-gabc1234-dirty), a fast build" in front and "1 copy its source changes" in front
    stale = (
        f"vipune-lib of build {checkout} copies `fn rrf` from src/rrf.rs, which this source changes (the "
        "fusion; the copy: lane/src/copies.rs: rrf): a stale copy: the binary runs this source's edit there, "
        "vipune-lib the code it copied, so its numbers do not follow that edit"
    )
    assert f"  ! {stale.replace('`', '')}" in text and f"- {stale}" in md
    assert "<code>fn rrf</code>" in front  # the warnings of the HTML report's first page
    assert (
        f"- {checkout}: vipune-lane 0.20.2-dddddddddddd (sha256 dddddddddddd): vipune's search code from checkout "
        "/src/vipune (v0.20.2-3-gabc1234-dirty), a fast build"
    ) in md  # report.md's builds section
    assert (
        f"- {release}: vipune-lane 0.20.2-cccccccccccc (sha256 cccccccccccc): vipune's search code from vipune "
        "0.20.2 from crates.io, beside build" in md
    )
