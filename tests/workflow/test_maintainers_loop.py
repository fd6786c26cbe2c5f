"""The maintainer's loop (issue 43): an edit of vipune's search measured by the lib lane alone. A
checkout compared with the release on vipune-lib reruns only the checkout's lib-lane shards, its
scores and the report (the release's lib-lane results are kept under its vipune-lane's fingerprint), and
the summary names the pairs the edit changed."""

import re
import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from support.fakes import fake_build, fake_lane_only
from support.results import report
from support.scenarios import make_workdir, planned, set_config, snakemake
from vipune_eval.core import lane_arms
from vipune_eval.stages.report import explain

pytestmark = pytest.mark.slow

SHARDS = 2
LIB = ["vipune-lib", "vipune-lib-semantic"]


def release_run(root, workflow_env, scenario_inputs):
    """A fake release's lib lane run once in root/run: the run and the release."""
    data, model = scenario_inputs("builds")
    release = fake_build(root / "release", preamble="# the release\n")[0]
    workdir = make_workdir(
        root / "run", data, model, scenario="builds", retrievers=LIB, vipune={"binary": str(release)}
    )
    snakemake(workdir, "--cores", "2", env=workflow_env)
    return workdir, release


@pytest.fixture(scope="module")
def loop_run(tmp_path_factory, workflow_env, scenario_inputs):
    """The release's lib lane run once; then a checkout whose search is edited (an OR query in
    BM25: the fake builds' way of changing the search) compared with it."""
    root = tmp_path_factory.mktemp("loop")
    workdir, release = release_run(root, workflow_env, scenario_inputs)
    checkout = fake_build(root / "checkout", preamble="FAKE_VIPUNE_FAULT=bm25-or export FAKE_VIPUNE_FAULT\n")[0]
    set_config(workdir, vipune={"binary": str(checkout), "compare": [str(release)]})
    return root, workdir, release, checkout


def test_an_edit_reruns_only_the_checkouts_lib_lane_its_scores_and_the_report(loop_run, workflow_env):
    root, workdir, release, checkout = loop_run
    assert planned(workdir, workflow_env) == {
        "search_vipune_lib": SHARDS,
        "score": 2,
        "report": 1,
        "plots": 1,
        "report_page": 1,
        "all": 1,
        # the plan's new files: the checkout's fingerprint, its vipune-lane's, the manifest
        "planned_text": 3,
        "planned_file": 3,
    }


def test_the_builds_are_compared_on_the_lib_lane_pair_by_pair(loop_run, workflow_env):
    root, workdir, release, checkout = loop_run
    snakemake(workdir, "--cores", "2", env=workflow_env)
    result = report(workdir)
    builds = result["builds"]
    assert len(builds) == 2 and builds[0]["id"] == result["provenance"]["vipune"]["id"]
    assert {b["id"] for b in builds} == set(result["provenance"]["builds"])
    assert all(b["run"].startswith("results/runs/vipune-lib-") for b in builds)
    # each build carries its own vipune-lane (issue 51 item 3: the compared build's was in no rendering)
    assert builds[0]["lane"] == result["provenance"]["lane"] and builds[1]["lane"]["binary"] == builds[1]["id"]
    assert builds[1]["run"] == f"results/runs/vipune-lib-{builds[1]['lane']['id']}.run"
    assert builds[1]["changes"]  # the OR query moves some pairs
    assert sum(r["a_better"] + r["b_better"] for r in builds[1]["comparison"]["overall"].values()) > 0
    summary = (workdir / "results/summary.txt").read_text()
    key = "recall@5"
    assert f"{builds[1]['id']} (vipune.compare " in summary and f"): vipune-lib {key} " in summary
    assert "; its vipune-lane: vipune's search code from the fake lane of the tests" in summary
    first = builds[1]["changes"][0]
    shown = key if key in first else next(k for k in first if k.startswith("recall@"))
    assert f"    {first['question_id']} ({first['question_type']}): {shown} " in summary  # the pairs the edit moved


CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


def test_explain_shows_why_a_moved_pair_moved_from_the_finished_runs_files(loop_run, workflow_env, tmp_path):
    """Issue 52: `vipune-eval explain` on a pair the edit moved sets both builds' top lists side by
    side with the arm ranks the lib lane recorded, whose fusion gives each build's list (checked by
    the command, and here again from the files); report.md and the HTML report explain every moved
    pair under `explain-<question_id>`, and the HTML's filter shows the one an address names."""
    root, workdir, release, checkout = loop_run
    snakemake(workdir, "--cores", "2", env=workflow_env)
    result = report(workdir)
    moved = [c["question_id"] for c in result["builds"][1]["changes"]]
    assert result["explanations"]["moved"] == moved
    qid = moved[0]
    proc = subprocess.run(
        [sys.executable, "-m", "vipune_eval", "explain", qid, "--run", str(workdir / "results")],
        capture_output=True,
        text=True,
        env=workflow_env,
        check=True,
    )
    out = proc.stdout
    assert out.startswith(f"{qid} (") and out.count("fused (k 25)") == 2 and "do not explain" not in out
    for build in result["builds"]:
        assert f"{build['id']}" in out
        run = build["run"].replace("results/runs/", "results/search/").removesuffix(".run")
        arms = lane_arms.read(sorted((workdir / run).glob("shard-*.arms.parquet")))[qid]
        rows = pq.read_table(workdir / "results/filter/rows.parquet").to_pylist()
        row = next(r for r in rows if r["question_id"] == qid)
        fused = explain.rrf([arms.semantic, arms.bm25], arms.k, [f"{qid}::{k}" for k in row["row_keys"]])
        scored = [
            line.split()[2] for line in (workdir / build["run"]).read_text().splitlines() if line.split()[0] == qid
        ]
        assert [row["row_docs"][r] for r, _ in fused[: len(scored)]] == scored, build["id"]
    page = (workdir / "results/html/report-page.html").read_text()
    text = (workdir / "results/report.md").read_text()
    for q in moved:
        assert f'id="explain-{q}"' in page and f'<a id="explain-{q}"></a>' in text
    if CHROMIUM is None:
        pytest.skip("no Chromium on PATH (Debian: apt-get install chromium): the filter is not run in a browser")
    dom = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            f"{(workdir / 'results/html/report-page.html').as_uri()}#explain-{qid}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    sections = dict(re.findall(r'<section class="explain" id="explain-([^"]+)"[^>]*?( hidden="")?>', dom))
    assert set(sections) == set(dict.fromkeys(moved + result["explanations"]["worst"]))
    assert [q for q, hidden in sections.items() if not hidden] == [qid]


# ---------------------------------------------------------------- the vipune-lane built alone, its stores kept (issue 54)


@pytest.fixture(scope="module")
def lane_only_run(tmp_path_factory, workflow_env, scenario_inputs):
    """The release's lib lane run once; then a checkout's lane built alone (build.sh --lane-only,
    its search edited) compared with it."""
    root = tmp_path_factory.mktemp("lane-only")
    workdir, release = release_run(root, workflow_env, scenario_inputs)
    checkout = fake_lane_only(root / "checkout", preamble="FAKE_VIPUNE_FAULT=bm25-or export FAKE_VIPUNE_FAULT\n")
    set_config(workdir, vipune={"binary": str(checkout), "compare": [str(release)]})
    return workdir, checkout


def test_a_lane_built_alone_is_the_loops_checkout_and_reuses_the_kept_stores(lane_only_run, workflow_env):
    """The loop's build is the vipune-lane alone: it reruns what a checkout's binary and lane rerun, the
    report names the build as a lane built alone, and its search edit reuses every persona's store
    the release's lane seeded (the fake lanes seed alike)."""
    workdir, _ = lane_only_run
    assert planned(workdir, workflow_env) == {
        "search_vipune_lib": SHARDS,
        "score": 2,
        "report": 1,
        "plots": 1,
        "report_page": 1,
        "all": 1,
        # the new build's fingerprint and the sources' record
        "planned_text": 2,
        "planned_file": 2,
    }
    snakemake(workdir, "--cores", "2", env=workflow_env)
    result = report(workdir)
    primary = result["provenance"]["vipune"]
    assert primary["lane_only"] and primary["id"] == result["builds"][0]["id"] == result["builds"][0]["lane"]["id"]
    assert result["builds"][1]["changes"]  # the edit moved pairs
    summary = (workdir / "results/summary.txt").read_text()
    assert "built alone (build.sh --lane-only: no binary)" in summary
    logs = sorted((workdir / "results/logs/search_vipune_lib").glob(f"vipune-lib-{primary['id']}/shard-*.log"))
    assert len(logs) == SHARDS and all(re.search(r"kept stores: \d+ reused, 0 kept", log.read_text()) for log in logs)
    markdown = (workdir / "results/report.md").read_text()
    assert f"a vipune-lane built alone, no binary: lane sha256 {primary['sha256']}" in markdown
