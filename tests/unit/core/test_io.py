"""vipune_eval.core.io's progress: a long stage shows it is alive in the terminal (issue 31)."""

import logging
import subprocess
import sys

import pytest

from support.imports import RECORDER, asked
from vipune_eval.core import io
from vipune_eval.errors import EvalError


def test_progress_is_logged_often_and_shown_on_stdout_every_minute(monkeypatch, capsys, caplog):
    clock = iter([0.0, 5.0, 12.0, 61.0, 70.0, 125.0])  # the start, then one reading per advance
    monkeypatch.setattr(io.time, "monotonic", lambda: next(clock))
    progress = io.Progress("embed shard-0-of-2: texts", total=100)
    with caplog.at_level(logging.INFO, logger="vipune_eval"):
        for _ in range(5):
            progress.advance(10)
    logged = [r.getMessage() for r in caplog.records]
    assert logged[0] == "embed shard-0-of-2: texts: 20 / 100 (1.7/s, ETA 0.8 min)"  # at 12 s
    assert len(logged) == 3  # at 12, 61 and 125 s: not at 5 or 70 (under 10 s since the last)
    shown = capsys.readouterr().out.splitlines()
    # on stdout (Snakemake's terminal) at 61 s and 125 s, not at 12 s
    assert shown == [
        "vipune-eval: embed shard-0-of-2: texts: 30 / 100 (0.5/s, ETA 2.4 min)",
        "vipune-eval: embed shard-0-of-2: texts: 50 / 100 (0.4/s, ETA 2.1 min)",
    ]


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_json_is_written_strict_a_non_finite_number_named_by_file_and_key(tmp_path, bad):
    """Issue 32 item 8: report.json held the bare token Infinity, which strict parsers reject."""
    target = tmp_path / "report.json"
    with pytest.raises(EvalError) as info:
        io.write_json(target, {"retrievers": {"h": {"metrics": {"recall@5": 0.5, "mrr": bad}}}, "x": [1, bad]})
    assert str(target) in info.value.message and "retrievers.h.metrics.mrr" in info.value.message
    assert repr(bad) in info.value.message and info.value.fix
    assert not target.exists() and not list(tmp_path.iterdir())
    with pytest.raises(EvalError, match=r"x\[1\]"):
        io.write_json_if_changed(target, {"x": [1, bad]})
    io.write_json(target, {"a": None, "b": 1.5})
    assert target.read_text() == '{\n  "a": null,\n  "b": 1.5\n}\n'


def test_a_parquet_file_is_read_in_the_columns_order_without_loading_pandas(tmp_path):
    """read_parquet is pq.read_table's table without pyarrow.dataset, which loads pandas (~0.3 s
    of every job that reads a file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"], "c": [0.5, 1.5]}), path)
    assert io.read_parquet(path, ["c", "a"]).equals(pq.read_table(path, columns=["c", "a"]))
    assert io.read_parquet(path).equals(pq.read_table(path))
    code = (
        f"{RECORDER}from vipune_eval.core.io import read_parquet\n"
        f"read_parquet({str(path)!r}, ['b'])\nprint({asked(('pandas',))})"
    )
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    )
    slow = f"{RECORDER}import pyarrow.parquet as pq\npq.read_table({str(path)!r})\nprint({asked(('pandas',))})"
    assert (
        subprocess.run([sys.executable, "-c", slow], capture_output=True, text=True, check=True).stdout.strip()
        == "['pandas']"
    )  # what the check would see
