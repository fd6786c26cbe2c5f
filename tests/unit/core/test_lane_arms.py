"""core/lane_arms.py: the lib lane's arms file. Which fused list is the semantic arm (told by the
vipune-lane's semantic search, whatever order vipune passed them in), what a persona without arms says
instead, and the file's round trip. The vipune-lane's side is tested in tests/unit/vipune/test_vipune_lane.py and
the file's writer in tests/unit/stages/search/test_vipune_lib.py, on the fake and the real lane."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vipune_eval.core import lane_arms
from vipune_eval.errors import EvalError

ROWS = [f"q::s{i}" for i in range(6)]
VECTOR = [["q::s2", 0.9], ["q::s0", 0.8], ["q::s5", 0.7], ["q::s1", 0.6], ["q::s3", 0.5], ["q::s4", 0.4]]
BM25 = [["q::s4", -3.0], ["q::s2", -1.0]]


def answer(lists, semantic=VECTOR[:3], **more) -> dict:
    return {
        "question_id": "q",
        "semantic": semantic,
        "hybrid": [["q::s2", 0.08], ["q::s4", 0.07]],
        "fusions": [{"k": 25.0, "lists": lists}],
        **more,
    }


@pytest.mark.parametrize("lists", [[VECTOR, BM25], [BM25, VECTOR]])
def test_the_semantic_arm_is_the_list_the_semantic_search_begins_in_either_order(lists):
    arms = lane_arms.from_answer(ROWS, answer(lists), limit=3, source="lane")
    assert arms.note is None and arms.k == 25.0
    assert arms.semantic == [(2, 0.9), (0, 0.8), (5, 0.7), (1, 0.6), (3, 0.5), (4, 0.4)]
    assert arms.bm25 == [(4, -3.0), (2, -1.0)] and arms.hybrid == [(2, 0.08), (4, 0.07)]


def test_a_semantic_search_shorter_than_its_limit_must_be_the_whole_arm():
    """Under its limit, the semantic search had every row: a longer list is not that arm."""
    arms = lane_arms.from_answer(ROWS, answer([VECTOR, BM25], semantic=VECTOR[:2]), limit=3, source="lane")
    assert arms.note and "cannot be told" in arms.note and arms.semantic == arms.bm25 == []
    whole = lane_arms.from_answer(ROWS, answer([VECTOR, BM25], semantic=VECTOR), limit=10, source="lane")
    assert whole.note is None and len(whole.semantic) == 6


@pytest.mark.parametrize(
    "changed, note",
    [
        ({"fusions": []}, "called rrf_fusion 0 times"),
        ({"fusions": [{"k": 25.0, "lists": [VECTOR, BM25]}] * 2}, "called rrf_fusion 2 times"),
        ({"fusions": [{"k": 25.0, "lists": [VECTOR, BM25, BM25]}]}, "fused 3 lists"),
        ({"fusions": [{"k": 25.0, "lists": [BM25, BM25[::-1]]}]}, "begins neither or both"),
        ({"unrecorded_arms": "src/rrf.rs: another signature"}, "src/rrf.rs: another signature"),
    ],
)
def test_a_persona_whose_arms_cannot_be_told_keeps_its_list_and_says_why(changed, note):
    arms = lane_arms.from_answer(ROWS, {**answer([VECTOR, BM25]), **changed}, limit=3, source="lane")
    assert note in arms.note and arms.k is None and arms.semantic == arms.bm25 == []
    assert arms.hybrid == [(2, 0.08), (4, 0.07)]


def test_an_answer_without_its_arms_or_with_foreign_rows_breaks_the_protocol():
    without = answer([VECTOR, BM25])
    del without["fusions"]
    with pytest.raises(EvalError, match=r"persona q: `lane` was asked for its arms \(--arms\) and answered none"):
        lane_arms.from_answer(ROWS, without, limit=3, source="lane")
    with pytest.raises(EvalError, match="not rows of this persona"):
        lane_arms.from_answer(ROWS, answer([VECTOR, [["elsewhere::s1", -1.0]]]), limit=3, source="lane")


def test_the_file_round_trips_and_reads_the_questions_asked(tmp_path):
    kept = [
        lane_arms.from_answer(ROWS, {**answer([VECTOR, BM25]), "question_id": qid}, limit=3, source="lane")
        for qid in ("q1", "q2")
    ]
    noted = lane_arms.PersonaArms("q3", None, "why not", [], [], [(1, None)])
    lane_arms.write(tmp_path / "a.arms.parquet", [*kept, noted])
    assert lane_arms.read([tmp_path / "a.arms.parquet"]) == {a.question_id: a for a in [*kept, noted]}
    assert list(lane_arms.read([tmp_path / "a.arms.parquet"], {"q3", "q9"})) == ["q3"]


def test_a_file_of_another_shape_is_named_with_its_fix(tmp_path):
    pq.write_table(pa.table({"question_id": ["q"]}), tmp_path / "old.arms.parquet")
    with pytest.raises(EvalError, match=r"old.arms.parquet is not an arms file of this version") as caught:
        lane_arms.read([tmp_path / "old.arms.parquet"])
    assert "search_vipune_lib" in caught.value.fix
