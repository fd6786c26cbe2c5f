"""The report without Snakemake (issue 28): ``build`` turns hand-made loaded inputs into the report
(no file read); the hand-made inputs are tests/support/report.py's."""

from __future__ import annotations

import sys

import pyarrow.parquet as pq
import pytest

from vipune_eval.stages.report.report import build


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


HOOKED: list = []  # the audit hook, once added (it cannot be removed)


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

    for module, names in (
        (pq, [n for n in dir(pq) if n.startswith("read_")] + ["ParquetFile", "ParquetDataset"]),
        (pyarrow, ["memory_map", "OSFile", "input_stream", "open_stream", "open_file"]),
        (pyarrow.dataset, ["dataset"]),
    ):
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


# ---------------------------------------------------------------- runs made with other settings (issue 51 item 4)


def test_a_run_made_at_another_search_limit_is_named_with_the_searches_that_make_it_again(loaded):
    """--rerun-triggers mtime: a changed search_limit reran only the report, which stated limit 20
    for runs made at 10."""
    from vipune_eval.errors import EvalError

    entry = loaded.views[0].entry
    entry["scored_with"] = {**entry["scored_with"], "ranking_settings": {"limit": 20, "depth": 20, "collapse": True}}
    loaded.manifest["searched_by"] = {
        "hybrid": ["search_arms", "fuse_reference"],
        "vipune": ["search_vipune"],
        "dense": ["search_arms", "fuse_reference"],
    }
    with pytest.raises(EvalError) as info:
        build(loaded)
    assert info.value.message.startswith(
        "3 run(s) were made with other settings than this config states, and the report would state these for them: "
    )
    assert (
        "dense in the session view: search limit 10, not 20, documents kept per pair 10, not 20" in (info.value.message)
        and "hybrid in the session view: " in info.value.message
    )
    assert info.value.fix.endswith("--forcerun fuse_reference score search_arms search_vipune")
    assert "without --rerun-triggers mtime" in info.value.fix


def test_a_run_scored_at_other_ks_is_named_not_a_key_error(loaded):
    """A changed ks crashed the report with KeyError: 'recall@20'; a score alone makes them again."""
    from vipune_eval.errors import EvalError

    entry = loaded.views[0].entry
    entry["ks"] = [1, 5, 20]
    entry["scored_with"] = {**entry["scored_with"], "ks": [1, 5, 20]}
    loaded.manifest["searched_by"] = {"hybrid": ["search_arms", "fuse_reference"]}
    with pytest.raises(EvalError) as info:
        build(loaded)
    assert "hybrid in the session view: ks [1, 5, 10], not [1, 5, 20]" in info.value.message
    assert info.value.fix.endswith("--forcerun score")


def test_a_run_of_an_earlier_version_without_its_settings_is_named(loaded):
    from vipune_eval.errors import EvalError

    del loaded.views[0].metrics["dense"]["scored_with"]
    with pytest.raises(EvalError, match=r"1 run\(s\) .*: dense in the session view: no settings recorded"):
        build(loaded)


def test_the_view_states_the_settings_every_run_was_made_with(loaded):
    report = build(loaded)
    assert (
        report["views"]["session"]["scored_with"]
        == loaded.views[0].metrics["dense"]["scored_with"]
        == {
            "ks": [1, 5, 10],
            "measure_names": ["recall", "recall_any", "recall_all", "ndcg", "mrr"],
            "ranking_settings": {"limit": 10, "depth": 10, "collapse": True},
            "turn_to_session": False,
        }
    )
