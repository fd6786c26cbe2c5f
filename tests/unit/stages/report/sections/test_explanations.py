"""stages/report/sections/explanations.py: a question's explanation as the report shows it (its
anchor, its category, the builds side by side, the arms' ranks, what the arms cannot explain), the
report's Explanations in report.md and the HTML page (searchable, filterable), and the warning
that names lists their arms do not explain."""

from __future__ import annotations

from vipune_eval.core.lane_arms import PersonaArms
from vipune_eval.stages.report import explain, markdown, report_page
from vipune_eval.stages.report.report import build
from vipune_eval.stages.report.sections import explanations
from vipune_eval.stages.report.sections.contents import document

IDS = [f"q0::s{i}" for i in range(4)]
DOCS = ["g0", "s1", "s2", "g1"]
SEMANTIC, BM25 = [(1, 0.9), (0, 0.8), (2, 0.1)], [(0, -2.5)]


def explained(qid: str = "q0", category: str = "temporal-reasoning", tamper: bool = False):
    """An explanation of two builds: the primary's arms explain its list; the other's list, with
    ``tamper``, is not what its arms fuse to."""
    pair = explain.Pair(
        qid, "where did *I* park `the` car?", category, ["g0", "g1"], IDS, DOCS, ["t0", "t1", "t2", "t3"]
    )
    fused = explain.rrf([SEMANTIC, BM25], 25.0, IDS)
    hybrid = fused[::-1] if tamper else fused
    builds = [
        explain.BuildLists(
            "0.20.2-primary00000",
            [DOCS[r] for r, _ in fused],
            None,
            PersonaArms(qid, 25.0, None, SEMANTIC, BM25, fused),
        ),
        explain.BuildLists(
            "0.20.2-other000000",
            [DOCS[r] for r, _ in hybrid],
            None,
            PersonaArms(qid, 25.0, None, SEMANTIC, BM25, hybrid),
        ),
    ]
    return explain.explain(pair, builds, {"t0": "user: the red **car** is parked", "t1": "user: hello"})


def test_an_explanation_sets_the_builds_side_by_side_with_their_arm_ranks():
    section = explanations.explanation(explained())
    assert (section.key, section.category, section.level) == ("explain-q0", "temporal-reasoning", 3)
    table = next(b for b in section.blocks if hasattr(b, "columns"))
    assert table.columns[:5] == [
        "rank",
        "0.20.2-primary00000 (primary): vipune-lib",
        "semantic",
        "bm25",
        "fused (k 25)",
    ]
    assert table.rows[0][:5] == ["1", "**g0** (gold)", "2 (0.800)", "1 (-2.5)", f"{1 / 27 + 1 / 26:.5f}"]
    assert table.rows[2][3] == "–"  # s2 is not among the BM25 arm's candidates
    lines = [item.text for block in section.blocks if hasattr(block, "items") for item in block.items]
    assert (
        "0.20.2-primary00000: gold **g1** is not in the top 10; semantic arm: not in the arm's candidates, "
        "BM25 arm: not in the arm's candidates"
    ) in lines
    assert "`g0`: user: the red *car* is parked" in lines  # dataset text: its marks made inert
    assert "`g1`: (no text)" in lines


def test_a_list_its_arms_do_not_explain_is_named_in_the_explanation_and_the_warnings(loaded):
    section = explanations.explanation(explained(tamper=True))
    lines = [item.text for block in section.blocks if hasattr(block, "items") for item in block.items]
    assert any(
        line.startswith("**0.20.2-other000000: the arms do not explain this list**: the RRF fusion (k = 25)")
        for line in lines
    )
    report = build(loaded)
    report["explanations"] = {"moved": ["q0"], "worst": [], "questions": {"q0": explained(tamper=True)}}
    assert any(
        w.startswith("the arms of vipune's hybrid search do not explain 1 explained list (q0 on 0.20.2-other000000)")
        for w in document(report).warnings
    )
    report["explanations"]["questions"] = {"q0": explained()}
    assert not any("do not explain" in w for w in document(report).warnings)


def test_the_report_explains_the_moved_and_the_worst_pairs_once_each(loaded):
    report = build(loaded)
    assert explanations.explanations_sections(report) == []  # a report without explanations
    report["explanations"] = {
        "moved": ["q1", "q0"],
        "worst": ["q0", "q4"],
        "questions": {q: explained(q) for q in ("q0", "q1", "q4")},
    }
    keys = [s.key for s in document(report).sections]
    first = keys.index("explanations")
    assert keys[first : first + 4] == ["explanations", "explain-q1", "explain-q0", "explain-q4"]
    assert keys.index("diagnostics") < first


def test_a_moved_pair_says_how_each_build_moved_it():
    report = {
        "builds": [
            {"id": "p"},
            {
                "id": "b1",
                "changes": [
                    {
                        "question_id": "q0",
                        "question_type": "x",
                        "gained@10": [],
                        "lost@10": ["g0"],
                        "recall@10": [1.0, 0.5],
                        "gained@5": [],
                        "lost@5": ["g0"],
                        "recall@5": [1.0, 0.5],
                    }
                ],
            },
        ]
    }
    assert explanations.moved_lines(report, "q0") == [
        "moved by b1: recall@5 0.50 in b1, 1.00 in the primary; recall@10 0.50 in b1, 1.00 in the primary"
    ]
    assert explanations.moved_lines(report, "q9") == []


def test_the_html_page_finds_each_explanation_by_its_id_and_filters_them(loaded):
    report = build(loaded)
    assert "explain-search" not in report_page.page(document(report), {})  # no explanations, no filter
    report["explanations"] = {
        "moved": ["q0"],
        "worst": ["q6"],
        "questions": {"q0": explained("q0"), "q6": explained("q6", "multi-session")},
    }
    page = report_page.page(document(report), {})
    assert (
        '<section class=explain id="explain-q0" data-category="temporal-reasoning"><h3>q0 (temporal-reasoning)</h3>'
        in page
    )
    assert '<section class=explain id="explain-q6" data-category="multi-session">' in page
    controls = page.index("<p class=explain-filter>")
    assert page.index("<h2>Explanations</h2>") < controls < page.index('id="explain-q0"')
    assert (
        '<option value="multi-session">multi-session</option><option value="temporal-reasoning">' in page
        and page.count("<script>") == 1
        and "location.hash" in page
    )
    text = markdown.markdown(document(report))
    assert '<a id="explain-q0"></a>\n\n### q0 (temporal-reasoning)' in text
