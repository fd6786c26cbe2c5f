"""The maintainer's loop (issue 43): an edit of vipune's search measured by the lib lane alone. A
checkout compared with the release on vipune-lib reruns only the checkout's lib-lane shards, its
scores and the report (the release's lib-lane results are kept under its lane's fingerprint), and
the summary names the pairs the edit changed."""

import pytest

from support.fakes import fake_build
from support.results import report
from support.scenarios import make_workdir, planned, set_config, snakemake

pytestmark = pytest.mark.slow

SHARDS = 2
LIB = ["vipune-lib", "vipune-lib-semantic"]


@pytest.fixture(scope="module")
def loop_run(tmp_path_factory, workflow_env, scenario_inputs):
    """The release's lib lane run once; then a checkout whose search is edited (an OR query in
    BM25: the fake builds' way of changing the search) compared with it."""
    root = tmp_path_factory.mktemp("loop")
    data, model = scenario_inputs("builds")
    release = fake_build(root / "release", preamble="# the release\n")[0]
    workdir = make_workdir(root / "run", data, model, scenario="builds", retrievers=LIB,
                           vipune={"binary": str(release)})
    snakemake(workdir, "--cores", "2", env=workflow_env)
    checkout = fake_build(root / "checkout", preamble="FAKE_VIPUNE_FAULT=bm25-or export FAKE_VIPUNE_FAULT\n")[0]
    set_config(workdir, vipune={"binary": str(checkout), "compare": [str(release)]})
    return root, workdir, release, checkout


def test_an_edit_reruns_only_the_checkouts_lib_lane_its_scores_and_the_report(loop_run, workflow_env):
    root, workdir, release, checkout = loop_run
    assert planned(workdir, workflow_env) == {"search_vipune_lib": SHARDS, "score": 2, "report": 1, "plots": 1,
                                              "report_page": 1, "all": 1,
                                              # the plan's new files: the checkout's fingerprint, its lane's, the manifest
                                              "planned_text": 3, "planned_file": 3}


def test_the_builds_are_compared_on_the_lib_lane_pair_by_pair(loop_run, workflow_env):
    root, workdir, release, checkout = loop_run
    snakemake(workdir, "--cores", "2", env=workflow_env)
    result = report(workdir)
    builds = result["builds"]
    assert len(builds) == 2 and builds[0]["id"] == result["provenance"]["vipune"]["id"]
    assert {b["id"] for b in builds} == set(result["provenance"]["builds"])
    assert all(b["run"].startswith("results/runs/vipune-lib-") for b in builds)
    assert builds[1]["changes"]  # the OR query moves some pairs
    assert sum(r["a_better"] + r["b_better"] for r in builds[1]["comparison"]["overall"].values()) > 0
    summary = (workdir / "results/summary.txt").read_text()
    key = "recall@5"
    assert f"{builds[1]['id']} (vipune.compare " in summary and f"): vipune-lib {key} " in summary
    first = builds[1]["changes"][0]
    shown = key if key in first else next(k for k in first if k.startswith("recall@"))
    assert f"    {first['question_id']} ({first['question_type']}): {shown} " in summary  # the pairs the edit moved
