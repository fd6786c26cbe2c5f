"""The report without Snakemake (issue 28): ``build`` turns hand-made loaded inputs into the report
(no file read); the hand-made inputs are tests/support/report.py's."""

from __future__ import annotations

import sys

import pytest
import pyarrow.parquet as pq

from vipune_eval.stages.report.report import build

from support.report import loaded  # noqa: F401 (the fixture)


def test_build_takes_every_number_from_what_was_loaded(loaded):
    report = build(loaded)
    vipune = loaded.views[0].metrics["vipune"]
    assert report["retrievers"]["vipune"]["metrics"] == vipune["metrics"]
    assert report["retrievers"]["dense"]["metrics"]["recall@1"] == pytest.approx(3 / 8)
    assert set(report["comparisons"]) == {"vipune vs hybrid", "vipune vs dense"}
    assert report["diagnostics"]["vipune_vs_hybrid"]["same_top1_share"] == 1.0
    truncation = report["diagnostics"]["truncation"]
    assert truncation["pairs_with_truncated_gold"] == 1 and truncation["session_texts"] == 9
    [cpu] = report["embed"]["providers"]
    assert report["embed"]["texts"] == 9 and cpu["provider"] == "cpu" and cpu["texts_per_s"] == 4.5
    assert report["provenance"]["dataset"] is loaded.dataset and report["builds"] == []
    assert report["splits"]["test"]["pairs"] == 6 and "dev" in report["splits"]


READS: list[list[str]] = []  # while a test watches: each file the process opened (an audit hook stays)


HOOKED: list = []            # the audit hook, once added (it cannot be removed)


FILE_EVENTS = {"open", "os.listdir", "os.scandir", "glob.glob", "sqlite3.connect", "mmap.__new__", "shutil.copyfile"}


def _audit(event: str, args: tuple) -> None:
    if READS and event in FILE_EVENTS:
        READS[-1].append(f"{event} {args[0] if args else ''}")


@pytest.fixture
def no_file_read(monkeypatch, tmp_path):
    """Every file the process opens while the test runs, as Python's audit hook sees it
    (builtins.open, io.open, os.open, Path.open/read_text/read_bytes, sqlite3, mmap, listings),
    and pyarrow's readers, whose C++ opens no hook sees, refused; the working directory an empty
    folder, so a results/ path the manifest names is not there either."""
    import pyarrow
    import pyarrow.dataset

    if not HOOKED:
        sys.addaudithook(_audit)
        HOOKED.append(_audit)

    def refuse(name):
        def read(*args, **kwargs):
            raise AssertionError(f"{name} {args[0] if args else ''}")
        return read

    for module, names in ((pq, [n for n in dir(pq) if n.startswith("read_")] + ["ParquetFile", "ParquetDataset"]),
                          (pyarrow, ["memory_map", "OSFile", "input_stream", "open_stream", "open_file"]),
                          (pyarrow.dataset, ["dataset"])):
        for name in names:
            if hasattr(module, name):
                monkeypatch.setattr(module, name, refuse(f"{module.__name__}.{name}"))
    monkeypatch.chdir(tmp_path)
    READS.append([])
    try:
        yield READS[-1]
    finally:
        READS.pop()


def test_build_reads_no_file(loaded, no_file_read):
    build(loaded)
    assert no_file_read == []


def test_ten_pairs_get_their_bootstrap_interval(tmp_path):
    from vipune_eval.stages.score import metric_intervals

    rows = [{"recall@5": v, "recall_any@5": v} for v in [1.0, 0.5] * 5]
    intervals = metric_intervals(rows, ["recall@5", "recall_any@5"])
    low, high = intervals["recall@5"]
    assert low < 0.75 < high
    assert metric_intervals(rows[:9], ["recall@5"]) == {"recall@5": None}
