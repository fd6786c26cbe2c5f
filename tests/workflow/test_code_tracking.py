"""An edit reruns what it changes, read from Snakemake's dry runs (issues 11, 28, 37): a module edited
in a copy of the repository plans exactly the rules whose command reaches it and their downstream
(the budgets that say which modules a command reaches: tests/unit/plan/test_codeversion.py)."""

import json
import shutil

import pytest

from support import scenarios
from support.rerun_plan import EDITS, closure, plan, reruns, rule_graph
from support.scenarios import REPO


@pytest.fixture(scope="module")
def copy(tmp_path_factory, workflow_env, scenario_inputs):
    root = tmp_path_factory.mktemp("tracking")
    repo = root / "repo"
    repo.mkdir()
    for part in ("workflow", "config", "vipune_eval", "lane"):
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, repo / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, repo / part)
    workdir = scenarios.make_workdir(root / "run", *scenario_inputs("tracking"), scenario="tracking")
    graph = rule_graph(
        workdir, workflow_env, snakefile=repo / "workflow/Snakefile"
    )  # before the run: it writes nothing
    scenarios.snakemake(workdir, "--cores", "2", env=workflow_env, snakefile=repo / "workflow/Snakefile")
    return repo, workdir, graph


def test_the_graph_is_snakemakes_own(copy):
    """The rules' DAG the plan is checked against comes from ``snakemake --rulegraph`` (issue 55
    item 3: nobody types it): the tracking scenario's rules, each stage downstream of its inputs."""
    _, _, graph = copy
    assert {"filter_rows", "embed", "search_arms", "fuse_reference", "score", "report", "plots"} <= set(graph)
    assert "embed" in graph["filter_rows"] and "score" in graph["fuse_reference"] and "report" in graph["score"]
    assert closure({"report"}, graph) == {"report", "plots", "report_page"}


@pytest.mark.parametrize("module", sorted(EDITS))
def test_editing_a_module_reruns_exactly_the_rules_that_reach_it(copy, workflow_env, module):
    repo, workdir, graph = copy
    path = (repo / "vipune_eval").joinpath(*module.split(".")).with_suffix(".py")
    original = path.read_bytes()
    try:
        path.write_bytes(original + b"\n# an edit\n")
        out = scenarios.snakemake(
            workdir, "-n", "--cores", "1", env=workflow_env, snakefile=repo / "workflow/Snakefile"
        ).stdout
    finally:
        path.write_bytes(original)
    planned, changed = plan(out)
    direct = reruns(module) & set(graph)  # the rules of this scenario's run
    assert planned == closure(direct, graph), out[-2000:]
    topmost = {r for r in direct if not any(r in graph[u] for u in closure(direct, graph) - {r})}
    assert changed == topmost, out[-2000:]


def test_an_edit_of_the_lanes_rust_reruns_only_the_lib_lane(copy, workflow_env, fake_vipune_bin):
    """Issue 37: lane/ edited and built again (build.sh names the new lane after its sources)
    plans the lib lane's searches, their scores and the report, nothing of the binary's lane; before
    the new lane is built the run is refused, naming the command that builds it."""
    from vipune_eval.vipune import lane_source

    repo, workdir, graph = copy
    source = repo / "lane" / "src" / "main.rs"
    original = source.read_bytes()
    old = fake_vipune_bin.parent / lane_source.lane_name(lane_source.source_sha256(repo / "lane"))
    try:
        source.write_bytes(original + b"\n// an edit\n")
        new = fake_vipune_bin.parent / lane_source.lane_name(lane_source.source_sha256(repo / "lane"))
        proc = scenarios.snakemake(workdir, "-n", env=workflow_env, snakefile=repo / "workflow/Snakefile", check=False)
        assert proc.returncode != 0 and f"{new} is not there" in proc.stderr, proc.stderr[-2000:]
        assert ".ci/vipune/build.sh" in proc.stderr
        new.write_bytes(old.read_bytes() + b"# built from the edited lane/\n")
        new.chmod(0o755)
        out = scenarios.snakemake(
            workdir, "-n", "--cores", "1", env=workflow_env, snakefile=repo / "workflow/Snakefile"
        ).stdout
    finally:
        source.write_bytes(original)
        new.unlink(missing_ok=True)
    planned, _ = plan(out)
    # and the plan's new files: the new lane's fingerprint, the report's manifest naming it
    assert planned == closure({"search_vipune_lib"}, graph) | {"planned_text", "planned_file"}, out[-2000:]


def test_with_the_download_rules_a_client_edit_plans_no_download_filter_or_embed(
    tmp_path, workflow_env, scenario_inputs
):
    """Issue 28: with the default config the dataset is downloaded (here from tests/support/hub.py,
    at the paper's pinned commit under its served name), and an edit of the vipune client reruns
    the preflight and vipune's searches, nothing upstream. The finished run's report holds the
    resolved commit and the sha256 the bytes were checked against (issue 30). (The model comes from
    a local folder: the tiny model under bge-small's pinned name is refused by the pins, rightly.)"""
    from support.hub import Hub
    from vipune_eval.core.io import sha256_file
    from vipune_eval.registry import datasets

    repo = tmp_path / "repo"
    repo.mkdir()
    for part in ("workflow", "config", "vipune_eval", "lane"):
        source = REPO / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, repo / part)
    data, model = scenario_inputs("tracking")
    with Hub() as hub:
        hub.add("datasets", datasets.ORIGINAL, datasets.ORIGINAL_AT, {"longmemeval_m": data.read_bytes()})
        env = {**workflow_env, "HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf-home")}
        env.pop("HF_HUB_OFFLINE")
        workdir = scenarios.make_workdir(tmp_path / "run", data, model, scenario="tracking")
        scenarios.set_config(workdir, dataset={"path": None, "preset": "m", "sha256": sha256_file(data)})
        scenarios.snakemake(workdir, "--cores", "2", env=env, snakefile=repo / "workflow/Snakefile")
        assert any(
            r[1] == f"/datasets/{datasets.ORIGINAL}/resolve/{datasets.ORIGINAL_AT}/longmemeval_m" for r in hub.requests
        )
        graph = rule_graph(workdir, env, snakefile=repo / "workflow/Snakefile")
        client = repo / "vipune_eval" / "vipune" / "client.py"
        client.write_text(client.read_text() + "\n# an edit\n")
        out = scenarios.snakemake(workdir, "-n", "--cores", "1", env=env, snakefile=repo / "workflow/Snakefile").stdout
    planned, _ = plan(out)
    assert planned == closure({"preflight", "search_vipune"}, graph), out[-2000:]
    assert not planned & {"download_dataset", "filter_pairs", "filter_rows", "embed"}
    report = json.loads((workdir / "results/report.json").read_text())
    assert report["provenance"]["dataset"]["resolved_commit"] == datasets.ORIGINAL_AT
    assert report["provenance"]["dataset"]["sha256"] == sha256_file(data)
    assert report["corpus"]["release"] == "custom" and not report["corpus"]["same_as_paper"]
