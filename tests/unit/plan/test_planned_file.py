"""The files the plan writes: their text is computed at parse time and written by the run alone."""

from pathlib import Path

import pytest

from vipune_eval.errors import EvalError
from vipune_eval.plan import planned_file


@pytest.fixture
def planned(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return planned_file.texts(
        {
            "results/fingerprints/dataset.json": {"kind": "dataset", "sha256": "a" * 64},
            "results/report-inputs.json": {"views": []},
        }
    )


def test_the_job_puts_the_staged_text_in_place(planned):
    planned_file.stage(planned)
    for path, text in planned.items():
        planned_file.run_planned_file(planned_file.digest(text), Path(path))
        assert Path(path).read_text() == text and text.endswith("}\n")
    planned_file.unstage()  # a run that succeeded leaves no scratch
    assert not Path("results/tmp/plan").exists()


def test_without_the_runs_start_the_job_says_what_to_do(planned):
    text = planned["results/report-inputs.json"]
    with pytest.raises(EvalError, match="the run stages the planned files when it starts") as info:
        planned_file.run_planned_file(planned_file.digest(text), Path("results/report-inputs.json"))
    assert "--no-hooks" in info.value.fix
    planned_file.stage(planned)
    planned_file.staged(planned_file.digest(text)).write_text("other bytes")
    with pytest.raises(EvalError, match="does not hold the text its name promises"):
        planned_file.run_planned_file(planned_file.digest(text), Path("results/report-inputs.json"))


def test_rerun_triggers_without_params_are_refused_only_where_a_file_changed(planned):
    """`--rerun-triggers mtime` cannot see a planned file's new text: the run would keep the old
    results, so it is refused, naming the file; a missing file (a first run) or an unchanged one passes."""
    planned_file.refuse_unseen(planned, params_tracked=False)  # nothing on disk yet
    for path, text in planned.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    planned_file.refuse_unseen(planned, params_tracked=False)
    Path("results/fingerprints/dataset.json").write_text("{}\n")  # the dataset changed since
    planned_file.refuse_unseen(planned, params_tracked=True)
    with pytest.raises(EvalError, match=r"^results/fingerprints/dataset.json changed") as info:
        planned_file.refuse_unseen(planned, params_tracked=False)
    assert "without --rerun-triggers" in info.value.fix


def test_a_new_text_depends_on_a_missing_mark_and_a_file_made_before_marks_on_none(planned):
    """The mark (an empty file named by the text's sha256) makes a new text a missing file: seen
    whatever the rerun triggers and whether Snakemake kept a record of the file. A file that holds
    its text and has no mark was written before marks were: nothing to rerun."""
    path, text = "results/report-inputs.json", planned["results/report-inputs.json"]
    mark = f"results/plan/{planned_file.digest(text)}"
    assert planned_file.mark(path, text) == [mark]  # not written yet
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("{}\n")
    assert planned_file.mark(path, text) == [mark]  # another text
    Path(path).write_text(text)
    assert planned_file.mark(path, text) == []  # its text, no mark: from before marks
    Path(mark).parent.mkdir(parents=True)
    Path(mark).touch()
    assert planned_file.mark(path, text) == [mark]  # marked: always its input from then on
