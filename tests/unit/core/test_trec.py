"""TREC run and qrels files: what is written reads back, any TREC tool sees the same order, and a
malformed file is refused naming the file and line."""

import pytest

from vipune_eval.core import trec
from vipune_eval.errors import EvalError


def test_a_run_reads_back_in_rank_order_with_strictly_decreasing_scores(tmp_path):
    trec.write_run(tmp_path / "a.run", [("q1", ["s3", "s1", "s2"]), ("q2", ["s9"])], "hybrid")
    assert (tmp_path / "a.run").read_text().splitlines()[0] == "q1 Q0 s3 1 3 hybrid"
    assert trec.read_run([tmp_path / "a.run"]) == {
        "q1": [("s3", 1, 3.0), ("s1", 2, 2.0), ("s2", 3, 1.0)],
        "q2": [("s9", 1, 1.0)],
    }


def test_shards_merge_into_one_run(tmp_path):
    trec.write_run(tmp_path / "0.run", [("q1", ["a", "b"])], "t")
    trec.write_run(tmp_path / "1.run", [("q2", ["c"])], "t")
    assert set(trec.read_run([tmp_path / "0.run", tmp_path / "1.run"])) == {"q1", "q2"}


def test_qrels_read_back(tmp_path):
    trec.write_qrels(tmp_path / "qrels.txt", {"q1": ["s1", "s2"], "q2": ["s3"]})
    assert trec.read_qrels(tmp_path / "qrels.txt") == {"q1": {"s1": 1, "s2": 1}, "q2": {"s3": 1}}


@pytest.mark.parametrize(
    "text,message",
    [
        ("q1 Q0 s1 1 hybrid\n", r"a\.run:1: a run line is 'qid Q0 docid rank score tag'"),
        ("q1 Q0 s1 1 2 t\nq1 Q0 s2 2 2 t\n", "q1 does not have strictly decreasing scores"),
        ("q1 Q0 s1 1 2 t\nq1 Q0 s1 2 1 t\n", "q1 lists a document twice"),
    ],
)
def test_a_malformed_run_is_refused(tmp_path, text, message):
    (tmp_path / "a.run").write_text(text)
    with pytest.raises(EvalError, match=message):
        trec.read_run([tmp_path / "a.run"])


def test_a_malformed_qrels_line_names_its_file_and_line(tmp_path):
    (tmp_path / "qrels.txt").write_text("q1 0 s1 1\nq2 s2 1\n")
    with pytest.raises(EvalError, match=r"qrels\.txt:2: a qrels line is 'qid 0 docid rel'"):
        trec.read_qrels(tmp_path / "qrels.txt")
