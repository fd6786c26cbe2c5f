"""Only what a change made stale reruns: content fingerprints of data, model and binary."""

import os
import shutil

import pytest
import yaml

from support.fakes import fake_build
from support.results import report
from support.scenarios import clone, planned, snakemake, write_config
from support.synthetic import write_dataset
from support.tinymodel import build_tiny_model
from vipune_eval.vipune.release import RELEASE

pytestmark = pytest.mark.slow

SEARCH_SHARDS = 3


@pytest.fixture(scope="module")
def setup(tmp_path_factory, standard, standard_run):
    """A run of its own (the tests change its config, binary and inputs in turn): a clone of the
    finished standard run on copies of its inputs, with a build of its own. Fingerprints follow
    content, so the clone has nothing to do (test_binary_lifecycle's first assertion)."""
    root = tmp_path_factory.mktemp("reruns")
    data = shutil.copy(standard[0], root / "data.json")
    model = shutil.copytree(standard[1], root / "model")
    binary, _ = fake_build(root)  # bin/vipune and its vipune-lane beside it, the same bytes as PATH's
    workdir = clone(standard_run, root / "run")
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    config = {
        **config,
        "dataset": {**config["dataset"], "path": str(data)},
        "model": {**config["model"], "path": str(model)},
        "vipune": {"binary": str(binary)},
    }
    write_config(workdir, config)
    assert config["search"]["shards"] == SEARCH_SHARDS
    return workdir, config, binary, data, model


REPORT = {"report": 1, "plots": 1, "report_page": 1, "all": 1}
# A change the report's manifest shows (a file of the plan, plan.planned_file) reruns the report:
# a manifest planned before is written again (MANIFEST_AGAIN), a new one marked first (planned_text).
MANIFEST_AGAIN = {"planned_file": 1, **REPORT}
NEW_MANIFEST = {"planned_text": 1, **MANIFEST_AGAIN}
# score: vipune-lib and its semantic run; the plan's new files: the vipune-lane's fingerprint, the manifest
LIB_ONLY = {"search_vipune_lib": SEARCH_SHARDS, "score": 2, **REPORT, "planned_text": 2, "planned_file": 2}
# A new vipune build: the binary and the vipune-lane built beside it from the same source (build.sh).
VIPUNE_BUILD = {
    "preflight": 1,
    "search_vipune": SEARCH_SHARDS,
    "search_vipune_lib": SEARCH_SHARDS,
    "score": 4,
    **REPORT,  # score: both runs of each lane
    "planned_text": 3,
    "planned_file": 3,
}  # the binary's fingerprint, its vipune-lane's, the manifest


def test_binary_lifecycle(setup, workflow_env, tmp_path):
    workdir, config, binary, _, _ = setup
    first = report(workdir)
    assert planned(workdir, workflow_env) == {}

    # Touched, same bytes: nothing, under the default triggers and under mtime alone.
    os.utime(binary, None)
    assert planned(workdir, workflow_env) == {}
    assert planned(workdir, workflow_env, "--rerun-triggers", "mtime") == {}

    # The same bytes at another path (the build's folder copied, its vipune-lane with it): the same binary.
    copy = shutil.copytree(binary.parent, tmp_path / "elsewhere") / "vipune"
    write_config(workdir, {**config, "vipune": {"binary": str(copy)}})
    assert planned(workdir, workflow_env) == {}

    # New bytes (with its vipune-lane): only the two lanes' search shards, their scores and the report.
    original = binary.read_bytes()
    binary.write_bytes(original + b"# rebuilt\n")
    write_config(workdir, config)
    assert planned(workdir, workflow_env) == VIPUNE_BUILD
    snakemake(workdir, "--cores", "2", env=workflow_env)
    second = report(workdir)
    assert second["provenance"]["vipune"]["sha256"] != first["provenance"]["vipune"]["sha256"]
    second_id = second["provenance"]["vipune"]["id"]

    # Back to the first binary: its results are kept under its fingerprint; nothing is searched.
    binary.write_bytes(original)
    jobs = planned(workdir, workflow_env)
    assert set(jobs) <= {"score", "report", "plots", "report_page", "all", "planned_file"}
    snakemake(workdir, "--cores", "2", env=workflow_env)
    again = report(workdir)
    assert again["provenance"]["vipune"] == first["provenance"]["vipune"]
    assert again["retrievers"]["vipune"]["metrics"] == first["retrievers"]["vipune"]["metrics"]

    # The second binary as a baseline, by fingerprint id: only the report reruns.
    write_config(workdir, {**config, "vipune": {"binary": str(binary), "baseline": second_id}})
    assert planned(workdir, workflow_env) == NEW_MANIFEST
    snakemake(workdir, "--cores", "2", env=workflow_env)
    compared = report(workdir)
    assert compared["baseline"]["vipune"]["id"] == second_id
    assert compared["baseline"]["metrics"] == second["retrievers"]["vipune"]["metrics"]
    assert isinstance(compared["baseline"]["changes"], list)
    assert "vipune baseline" in (workdir / "results/report.md").read_text()

    write_config(workdir, {**config, "vipune": {"binary": str(binary), "baseline": "0.0.0-nothing"}})
    proc = snakemake(workdir, "-n", env=workflow_env, check=False)
    assert proc.returncode != 0 and "neither an executable vipune nor the fingerprint" in proc.stderr
    write_config(workdir, config)
    snakemake(workdir, "--cores", "2", env=workflow_env)  # dropping the baseline reruns the report


def test_lane_lifecycle(setup, workflow_env):
    """Issue 37: the vipune-lane rebuilt (new bytes, vipune.binary unchanged) reruns only the lib lane's
    search shards, their scores and the report; back to the first lane nothing is searched; a
    lane that is gone is refused before any job, naming the command that builds it."""
    from vipune_eval.vipune import lane_source

    workdir, config, binary, _, _ = setup
    lane = binary.parent / lane_source.lane_name(lane_source.source_sha256())
    first = report(workdir)
    original = lane.read_bytes()
    lane.write_bytes(original + b"# the vipune-lane rebuilt\n")
    assert planned(workdir, workflow_env) == LIB_ONLY
    snakemake(workdir, "--cores", "2", env=workflow_env)
    rebuilt = report(workdir)
    assert rebuilt["provenance"]["lane"]["sha256"] != first["provenance"]["lane"]["sha256"]
    assert rebuilt["provenance"]["vipune"] == first["provenance"]["vipune"]
    assert rebuilt["retrievers"]["vipune-lib"]["run"] != first["retrievers"]["vipune-lib"]["run"]

    lane.write_bytes(original)
    assert set(planned(workdir, workflow_env)) <= {"score", "report", "plots", "report_page", "all", "planned_file"}
    snakemake(workdir, "--cores", "2", env=workflow_env)
    assert report(workdir)["retrievers"]["vipune-lib"]["metrics"] == first["retrievers"]["vipune-lib"]["metrics"]

    lane.rename(lane.with_name("vipune-lane-elsewhere"))
    try:
        proc = snakemake(workdir, "-n", env=workflow_env, check=False)
    finally:
        lane.with_name("vipune-lane-elsewhere").rename(lane)
    assert proc.returncode != 0 and f"{lane} is not there" in proc.stderr
    assert f".ci/vipune/build.sh {RELEASE}" in proc.stderr and "drop vipune-lib and vipune-lib-semantic" in proc.stderr
    assert planned(workdir, workflow_env) == {}


EMBED_AND_AFTER = {
    "embed",
    "vipune_home",
    "preflight",
    "search_arms",
    "fuse_reference",
    "search_vipune",
    "search_vipune_lib",
    "score",
    "report",
    "plots",
    "report_page",
    "all",
    "planned_text",
    "planned_file",
}  # the model's new fingerprint, written by the run


def test_model_and_dataset_changes(setup, workflow_env, tmp_path):
    workdir, config, _, data, model = setup
    for path in [data, *model.iterdir()]:
        os.utime(path, None)
    assert planned(workdir, workflow_env) == {}
    assert planned(workdir, workflow_env, "--rerun-triggers", "mtime") == {}

    write_config(workdir, {**config, "model": {**config["model"], "pooling": "cls"}})
    assert set(planned(workdir, workflow_env)) == EMBED_AND_AFTER

    other_model = build_tiny_model(tmp_path / "other-model", seed=1)
    write_config(workdir, {**config, "model": {**config["model"], "path": str(other_model)}})
    assert set(planned(workdir, workflow_env)) == EMBED_AND_AFTER
    # Under --rerun-triggers mtime the fingerprint's new text is not seen: refused, not kept stale.
    proc = snakemake(workdir, "-n", "--rerun-triggers", "mtime", env=workflow_env, check=False)
    assert proc.returncode == 1 and "results/fingerprints/model.json changed" in proc.stderr

    same_model = shutil.copytree(model, tmp_path / "same-model")
    write_config(workdir, {**config, "model": {**config["model"], "path": str(same_model)}})
    assert planned(workdir, workflow_env) == {}

    other_data = tmp_path / "other.json"
    write_dataset(other_data, instances=12, abstention=1, sessions_per_haystack=8, filler_pool=20, seed=6)
    write_config(workdir, {**config, "dataset": {**config["dataset"], "path": str(other_data)}})
    assert set(planned(workdir, workflow_env)) == (EMBED_AND_AFTER | {"filter_pairs", "filter_rows"}) - {
        "vipune_home",
        "preflight",
    }
    write_config(workdir, config)


def test_adding_and_dropping_a_granularity_reruns_nothing_of_the_others(setup, workflow_env):
    """Issue 12: a granularity is a separate set of results; dropping it reruns only the report."""
    workdir, config, _, _, _ = setup
    with_turns = {**config, "granularities": ["session", "turn"]}
    write_config(workdir, with_turns)
    jobs = planned(workdir, workflow_env)
    assert jobs["filter_pairs"] == jobs["filter_rows"] == 1 and jobs["embed"] == 2  # the turn view's own
    assert jobs["search_vipune"] == jobs["search_arms"] == jobs["search_vipune_lib"] == SEARCH_SHARDS
    assert "preflight" not in jobs and "vipune_home" not in jobs
    snakemake(workdir, "--cores", "2", env=workflow_env)
    assert set(report(workdir)["granularities"]) == {"session", "turn"}
    write_config(workdir, config)
    assert planned(workdir, workflow_env) == MANIFEST_AGAIN
    snakemake(workdir, "--cores", "2", env=workflow_env)
    write_config(workdir, with_turns)
    assert planned(workdir, workflow_env) == MANIFEST_AGAIN  # its results were kept
    write_config(workdir, config)
    snakemake(workdir, "--cores", "2", env=workflow_env)


def test_changing_the_split_reruns_no_search(setup, workflow_env):
    """The dev/test label lives in pairs.parquet; the rows the searches read do not change."""
    workdir, config, _, _, _ = setup
    write_config(workdir, {**config, "split": {"seed": 1, "dev_fraction": 0.3}})
    assert planned(workdir, workflow_env) == {"filter_pairs": 1, "score": 9, **REPORT}
    write_config(workdir, config)
    assert planned(workdir, workflow_env) == {}
