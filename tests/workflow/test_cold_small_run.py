"""One cold run of the ``small`` scenario made as awkward as a user's machine can make it, read by
three tests: every path holds spaces (the run's folder, the dataset's, the model's and the vipune
build's), question ids hold separators, and the run has a HOME of its own that nothing may touch.
One run instead of three: each test reads its own promise off it."""

import json
import shutil
from pathlib import Path

import pytest

from support.fakes import fake_build
from support.results import report
from support.scenarios import make_workdir, snakemake

RENAMED = ["a::b", "x/y", "-lead", "q::1::2"]  # question ids holding separators and a leading dash


@pytest.fixture(scope="module")
def cold_run(small, workflow_env, tmp_path_factory):
    """(workdir, HOME) of the finished run."""
    data, model = small
    root = tmp_path_factory.mktemp("cold-small")
    spaced = root / "a folder with spaces"
    (spaced / "sp ace").mkdir(parents=True)
    rows = json.loads(Path(data).read_text())
    usable = [r for r in rows if not r["question_id"].endswith("_abs")]
    for row, qid in zip(usable, RENAMED):
        row["question_id"] = qid
    (spaced / "sp ace" / "lme.json").write_text(json.dumps(rows))
    shutil.copytree(model, spaced / "my model")
    binary, _ = fake_build(spaced / "my build")  # the vipune-lane beside it, in a folder with spaces too
    workdir = make_workdir(
        spaced / "the run",
        spaced / "sp ace" / "lme.json",
        spaced / "my model",
        scenario="small",
        granularities=["session", "chunk"],
        vipune={"binary": str(binary)},
    )
    home = root / "home"
    home.mkdir()
    env = {**workflow_env, "HOME": str(home), "XDG_CACHE_HOME": str(root / "launcher-cache")}
    env.pop("XDG_CONFIG_HOME", None)
    snakemake(workdir, "--cores", "2", env=env)  # a cold run: every stage, every vipune call
    return workdir, home


def test_question_ids_holding_separators_score_like_any_other(cold_run):
    workdir, _ = cold_run
    result = report(workdir)
    for name in ("vipune", "dense", "hybrid"):
        metrics = json.loads(
            (
                workdir / result["retrievers"][name]["run"].replace("runs", "metrics").replace(".run", ".json")
            ).read_text()
        )
        for qid in RENAMED:
            assert metrics["per_query"][qid]["recall@10"] == 1.0, (name, qid)  # was 0: ids were split


def test_spaces_in_the_workdir_dataset_model_and_binary_paths(cold_run):
    """Issue 10 item 4: the dataset and model paths reached the shell commands of filter, embed,
    preflight and vipune-home unquoted (``error: unrecognized arguments: ace/lme.json``). Every
    path, in every rule, is quoted: a run from a folder with spaces in its name, on a dataset, a
    model and a vipune binary in folders with spaces (chunk rows too: the tokenizer's path)."""
    workdir, _ = cold_run
    result = report(workdir)
    assert result["pairs"] == 5 and result["retrievers"]["vipune"]["pairs"] == 5
    assert result["retrievers"]["vipune-lib"]["pairs"] == 5
    assert set(result["views"]) == {"session", "chunk"} and result["views"]["chunk"]["pairs"] == 5


def test_a_run_writes_nothing_under_home(cold_run):
    """Issue 9: every vipune call (fingerprint, preflight, search) has a private HOME and config
    dir; the stages' library caches go under results/.cache. Snakemake's own source cache
    follows $XDG_CACHE_HOME, which points elsewhere here (it is the launcher's, not ours)."""
    workdir, home = cold_run
    assert report(workdir)["pairs"] == 5
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []
