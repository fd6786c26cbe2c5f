"""stages/report/explain.py: vipune's fusion of the recorded arms and its check against the list it
explains, an explanation's columns, and ``vipune-eval explain`` on a hand-made finished run (its
output and its errors). The arms' recording is tested on the real lane (tests/unit/vipune/test_vipune_lane.py),
the whole on a workflow run (tests/workflow/test_maintainers_loop.py) and on real vipune builds
(tests/project/test_build_script.py)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vipune_eval.core import lane_arms
from vipune_eval.core.lane_arms import PersonaArms
from vipune_eval.errors import EvalError
from vipune_eval.stages.filter.pairs import PAIRS_SCHEMA
from vipune_eval.stages.filter.rows import ROWS_SCHEMA
from vipune_eval.stages.report import explain
from vipune_eval.stages.report.document import one_line
from vipune_eval.stages.report.explain import BuildLists, Pair


def test_the_fusion_is_vipunes_rrf_ranks_from_one_ties_to_the_smaller_id():
    """src/rrf.rs's own test_rrf_fusion_ranking_priority: ranks 1 and 3 tie with 3 and 1 and beat
    2 and 2; the tie goes to the smaller id, whatever the rows' order."""
    ids = ["mem-2", "mem-3", "mem-1"]  # rows 0, 1, 2
    semantic, bm25 = [(2, 0.9), (1, 0.8), (0, 0.7)], [(0, 0.9), (1, 0.8), (2, 0.7)]
    fused = explain.rrf([semantic, bm25], 25.0, ids)
    assert [ids[row] for row, _ in fused] == ["mem-1", "mem-2", "mem-3"]
    assert fused[0][1] == fused[1][1] == 1 / 26 + 1 / 28 and fused[2][1] == 2 / 27
    assert [row for row, _ in explain.rrf([semantic, []], 60.0, ids)] == [2, 1, 0]  # one arm: its order


IDS = [f"q::s{i}" for i in range(6)]
DOCS = [f"s{i}" for i in range(6)]
SEMANTIC = [(2, 0.9), (0, 0.8), (5, 0.7), (1, 0.6)]
BM25 = [(4, -3.0), (2, -1.0)]


def arms(k: float = 25.0, hybrid: list | None = None) -> PersonaArms:
    fused = explain.rrf([SEMANTIC, BM25], k, IDS)
    return PersonaArms("q", k, None, SEMANTIC, BM25, fused[:3] if hybrid is None else hybrid)


def test_arms_that_fuse_to_the_list_explain_it():
    assert explain.mismatch(arms(), IDS, DOCS, ["s2", "s4", "s0"]) is None


def test_a_list_the_arms_do_not_fuse_to_is_named_where_it_differs():
    """A hybrid list made with k 60 from arms recorded as fused with k 25 (an edit the vipune-lane did
    not see), or in another order: named, with the rank and both documents."""
    at_60 = arms(60.0).hybrid
    said = explain.mismatch(arms(25.0, at_60), IDS, DOCS, ["s2", "s4", "s0"])
    assert said.startswith("the RRF fusion (k = 25) of the recorded arms gives s2 (") and "at rank 1" in said
    swapped = arms().hybrid
    swapped[0], swapped[1] = swapped[1], swapped[0]
    said = explain.mismatch(arms(25.0, swapped), IDS, DOCS, ["s4", "s2", "s0"])
    assert "gives s2 (0.075499) at rank 1, where vipune's hybrid search returned s4 (0.038462)" in said


def test_a_hybrid_list_that_is_not_the_runs_is_named():
    said = explain.mismatch(arms(), IDS, DOCS, ["s2", "s0", "s4"])
    assert said.startswith("the recorded hybrid list (s2, s4, s0) is not the run's (s2, s0, s4)")


PAIR = Pair("q", "where is the red car?", "multi-session", ["s4", "s3"], IDS, DOCS, [f"t{i}" for i in range(6)])


def test_a_column_shows_each_hit_in_both_arms_and_each_gold_session_outside_the_top():
    column = explain.explain_build(PAIR, BuildLists("b1", ["s2", "s4", "s0"], ["s2", "s0", "s4"], arms()))
    assert column["k"] == 25.0 and column["mismatch"] is None and column["arms"] is None
    assert column["top"][1] == {
        "doc": "s4",
        "gold": True,
        "semantic": None,
        "bm25": [1, -3.0],
        "fused": pytest.approx(1 / 26),
    }
    assert column["top"][0]["semantic"] == [1, 0.9] and column["top"][0]["bm25"] == [2, -1.0]
    assert column["gold_outside"] == [{"doc": "s3", "semantic": None, "bm25": None}]
    assert column["binary"] == ["s2", "s0", "s4"]  # the binary ranks otherwise


def test_a_column_without_arms_or_without_a_list_says_why():
    noted = PersonaArms("q", None, "vipune's hybrid search fused 3 lists", [], [], arms().hybrid)
    column = explain.explain_build(PAIR, BuildLists("b1", ["s2", "s4", "s0"], None, noted))
    assert column["arms"] == "vipune's hybrid search fused 3 lists" and column["k"] is None
    assert column["top"][0]["semantic"] is None and column["top"][0]["fused"] is None
    binary_only = explain.explain_build(PAIR, BuildLists("b2", None, ["s3"], None, "no arms: its binary alone"))
    assert binary_only["retriever"] == "vipune" and binary_only["arms"] == "no arms: its binary alone"
    assert binary_only["top"][0]["gold"] and not binary_only["failed"]
    assert explain.explain_build(PAIR, BuildLists("b3", None, None, None))["failed"]


def test_a_sessions_text_is_its_first_120_characters_on_one_line():
    pair = explain.Pair("q", "?", "temporal-reasoning", ["g"], ["q::g", "q::s"], ["g", "s"], ["t0", "t1"])
    texts = explain.explain(pair, [], {"t0": "user: a\n  b", "t1": "x" * 200})["texts"]
    assert texts["g"] == "user: a b" and texts == {"g": "user: a b"}  # the gold session alone is shown
    assert one_line("x" * 200, explain.SNIPPET) == "x" * 119 + "…"


# ---------------------------------------------------------------- a hand-made finished run


def finished_run(root, arms_recorded: bool = True):
    """results/ of a run: two pairs, a primary build and a compared one on the lib lane."""
    results = root / "results"
    (results / "filter").mkdir(parents=True)
    gold = {"q1": ["s4"], "q2": ["s0"]}
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "question_id": q,
                    "question_type": "temporal-reasoning",
                    "question": f"question {q}?",
                    "question_date": "",
                    "split": "test",
                    "gold": g,
                    "gold_source": "answer_session_ids",
                    "session_ids": DOCS,
                    "user_side_evidence": True,
                }
                for q, g in gold.items()
            ],
            schema=PAIRS_SCHEMA,
        ),
        results / "filter/pairs.parquet",
    )
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "question_id": q,
                    "question": "?",
                    "question_text_id": "tq",
                    "row_keys": DOCS,
                    "row_sessions": DOCS,
                    "row_docs": DOCS,
                    "row_text_ids": [f"t{i}" for i in range(6)],
                    "row_created_at": ["2023"] * 6,
                }
                for q in gold
            ],
            schema=ROWS_SCHEMA,
        ),
        results / "filter/rows.parquet",
    )
    pq.write_table(
        pa.table({"text_id": [f"t{i}" for i in range(6)], "text": [f"user: session {i} text" for i in range(6)]}),
        results / "filter/texts.parquet",
    )
    explained = []
    for build, k in (("0.20.2-aaaaaaaaaaaa", 25.0), ("0.20.2-bbbbbbbbbbbb", 60.0)):
        folder = results / "search" / f"vipune-lib-{build}"
        folder.mkdir(parents=True)
        recorded = {
            q: PersonaArms(
                q, k, None, SEMANTIC, BM25, explain.rrf([SEMANTIC, BM25], k, [f"{q}::{d}" for d in DOCS])[:3]
            )
            for q in gold
        }
        if arms_recorded:
            lane_arms.write(folder / "shard-0-of-1.arms.parquet", recorded.values())
        metrics = {
            "per_query": {
                q: {"ranked": [DOCS[row] for row, _ in a.hybrid], "question_type": "temporal-reasoning"}
                for q, a in recorded.items()
            }
        }
        (results / "metrics").mkdir(exist_ok=True)
        (results / "metrics" / f"vipune-lib-{build}.json").write_text(json.dumps(metrics))
        explained.append(
            {
                "build": build,
                "binary": None,
                "lib": f"results/metrics/vipune-lib-{build}.json",
                "arms": [f"results/search/vipune-lib-{build}/shard-0-of-1.arms.parquet"],
            }
        )
    view = {
        "pairs": "results/filter/pairs.parquet",
        "rows": "results/filter/rows.parquet",
        "texts": "results/filter/texts.parquet",
    }
    (results / "report-inputs.json").write_text(json.dumps({"views": [view], "explained": explained}))
    return results


def test_explain_prints_each_builds_top_with_its_arm_ranks_from_a_finished_run(tmp_path, capsys):
    results = finished_run(tmp_path / "run")
    explain.run_explain("q1", results)
    out = capsys.readouterr().out
    assert out.startswith("q1 (temporal-reasoning)\n") and "“question q1?” — gold: s4" in out
    assert "0.20.2-aaaaaaaaaaaa (primary): vipune-lib" in out and "fused (k 60)" in out
    table = [line.split() for line in out.splitlines() if line.startswith("1 ")]
    assert table == [["1", "s2", "1", "(0.900)", "2", "(-1)", "0.07550", "s2", "1", "(0.900)", "2", "(-1)", "0.03252"]]
    assert "s4 (gold)" in out and "s4: user: session 4 text" in out
    assert "the arms do not explain" not in out


def test_an_unknown_question_names_the_run_and_the_ids_near_it(tmp_path):
    results = finished_run(tmp_path / "run")
    with pytest.raises(EvalError, match=r"^q3 is not a question of the run in .*results \(2 questions") as caught:
        explain.run_explain("q3", results)
    assert caught.value.fix.startswith(("did you mean q1 or q2?", "did you mean q2 or q1?"))


def test_a_folder_without_a_run_or_a_run_without_arms_says_how_to_get_them(tmp_path):
    with pytest.raises(EvalError, match="holds no finished run") as caught:
        explain.run_explain("q1", tmp_path)
    assert "--run" in caught.value.fix
    results = finished_run(tmp_path / "run", arms_recorded=False)
    with pytest.raises(EvalError, match="recorded no arms of vipune's hybrid search for q1") as caught:
        explain.run_explain("q1", results)
    assert "search_vipune_lib jobs record the arms" in caught.value.fix
    assert "is not there (a run made before vipune-eval recorded them" in caught.value.message


def test_a_build_searched_by_its_binary_alone_shows_its_list_and_why_it_has_no_arms(tmp_path):
    results = finished_run(tmp_path / "run")
    manifest = json.loads((results / "report-inputs.json").read_text())
    binary_only = {"build": "0.19.1-cccccccccccc", "binary": manifest["explained"][1]["lib"], "lib": None, "arms": []}
    manifest["explained"].append(binary_only)
    [column] = explain.explanations(manifest, ["q2"], lambda p: tmp_path / "run" / p)["q2"]["builds"][2:]
    assert column["retriever"] == "vipune" and [h["doc"] for h in column["top"]] == ["s2", "s4", "s0"]
    assert column["arms"].startswith(
        "no arms: 0.19.1-cccccccccccc has no lib-lane run here (the arms come from vipune-lib: add it to `retrievers`"
    )
    assert column["top"][0]["semantic"] is None and column["k"] is None
