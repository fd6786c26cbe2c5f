"""The gate and the lanes' causes on real builds of vipune 0.20.2's source (issue 52 item 5).

Two copies of the release's own sources (tests/support/vipune_edits.py), set up and first built
`--fast` by .ci/run (VIPUNE_EVAL_GATE_EDITS_FIXTURE, VIPUNE_EVAL_GATE_COMMENT_FIXTURE): one with three
edits of the search's path (the dispatch: short queries skip BM25; bge's instruction before a
search's query; a minimum cosine of 0.2 in the vector scan, a loss on the tiny model's vectors),
one with a comment. Each edit alone is also checked on the source (no build): compiled into the
vipune-lane, or named as a stale copy. Skipped, saying why, where CI has not set them up.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support import ci_steps, real_vipune, vipune_edits
from support.scenarios import REPO, make_workdir, set_config, snakemake
from vipune_eval.core.model_files import ModelFiles
from vipune_eval.errors import EvalError
from vipune_eval.stages.report import gate
from vipune_eval.stages.report.sections.provenance import stale_copies
from vipune_eval.stages.search.preflight import run_preflight
from vipune_eval.vipune import lane_source
from vipune_eval.vipune.binary import binary_fingerprint
from vipune_eval.vipune.settings import VipuneSettings

pytestmark = pytest.mark.real_vipune

LIB = ["vipune-lib", "vipune-lib-semantic"]
BOTH = ["vipune", "vipune-semantic", *LIB]


def fast_build(folder: Path) -> Path:
    """The binary of ``build.sh --checkout folder --fast`` (built by .ci/run: seconds here)."""
    proc = subprocess.run(
        ["bash", str(real_vipune.BUILD), "--checkout", str(folder), "--fast"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def release() -> Path:
    binary, why = real_vipune.find()
    if binary is None:
        pytest.fail(why) if real_vipune.required() else pytest.skip(why)
    return binary


@pytest.fixture(scope="module")
def edits_build() -> Path:
    return fast_build(real_vipune.fixture_tree("VIPUNE_EVAL_GATE_EDITS_FIXTURE"))


@pytest.mark.parametrize(
    "edit, stale",
    [
        ("dispatch", [("src/commands/mod.rs", "fn execute")]),
        ("query-prefix", [("src/embedding/engine.rs", "fn prefix_input")]),
        ("min-cosine", []),  # src/sqlite/search.rs: vipune's library, which the vipune-lane links
        ("comment", []),  # src/rrf.rs: compiled into the vipune-lane
    ],
)
def test_each_edit_of_the_search_path_is_compiled_into_the_lane_or_named_as_a_stale_copy(tmp_path, edit, stale):
    source = vipune_edits.edited_copy(
        real_vipune.fixture_tree("VIPUNE_EVAL_CHECKOUT_FIXTURE"), tmp_path / f"vipune-{edit}", [edit]
    )
    found = lane_source.vipune_sources(source)
    assert [(c["file"], c["item"]) for c in found["copies"] if not c["same"]] == stale
    named = stale_copies({"provenance": {"lane": {"binary": "the checkout", "built": {"sources": found}}}})
    assert [s.split(", which")[0] for s in named] == [f"vipune-lib copies `{item}` from {file}" for file, item in stale]


def test_the_preflight_names_the_query_prefix_as_the_query_embeddings_change(
    edits_build, vipune_hf_home, vipune_tiny_model_dir, tmp_path
):
    fingerprint = tmp_path / "fp.json"
    fingerprint.write_text(json.dumps(binary_fingerprint(edits_build, 60)))
    settings = VipuneSettings(str(edits_build), fingerprint, vipune_hf_home, tmp_path / "tmp", timeout=60)
    model = ModelFiles(vipune_tiny_model_dir, "model.onnx", "mean")
    found = run_preflight(settings, model, tmp_path / "record.json", "record")
    assert found["embedding_parity"]["min_cosine"] > 0.999  # its passages are embedded as before
    assert not found["query_embedding_parity"]["passed"] and found["query_embedding_parity"]["min_cosine"] < 0.999
    assert any(
        d.startswith("the query's embedding differs: vipune embeds a search's query with cosine ")
        for d in found["drift"]
    )
    with pytest.raises(EvalError, match="check 'query_embedding_parity' failed: the query's embedding differs"):
        run_preflight(settings, model, tmp_path / "enforce.json", "enforce")


@pytest.fixture(scope="module")
def edits_run(edits_build, release, scenario_inputs, workflow_env, tmp_path_factory) -> Path:
    """The edits build against the release, both lanes, the binary's preflight recorded."""
    workdir = make_workdir(
        tmp_path_factory.mktemp("gate-edits") / "run",
        *scenario_inputs("gate"),
        scenario="gate",
        retrievers=BOTH,
        vipune={"binary": str(edits_build), "compare": [str(release)], "preflight": "record"},
    )
    snakemake(workdir, "--cores", "2", env=workflow_env)
    return workdir


def test_on_the_binary_an_edit_that_hurts_fails_the_gate_and_every_cause_is_named(edits_run, capsys):
    results = edits_run / "results"
    report = json.loads((results / "report.json").read_text())
    assert report["builds_compared_on"] == "vipune"
    assert gate.run_gate(results) == gate.FAIL
    md = (results / "gate.md").read_text()
    assert md.startswith("## ❌ vipune-eval gate: fail (exit 1)") and "- worse: recall@" in md
    assert "the pairs that lost most: " in md
    # the two edits vipune-lib does not run, named as stale copies; the query's, by the preflight too
    summary = (results / "summary.txt").read_text()
    for item, file in (("fn execute", "src/commands/mod.rs"), ("fn prefix_input", "src/embedding/engine.rs")):
        assert f"vipune-lib copies {item} from {file}, which this source changes" in summary
    assert "query_embedding_parity" in report["builds"][0]["failed_checks"]
    [apart] = [line for line in summary.splitlines() if "(the binary) rank" in line and "differently" in line][:1]
    assert "why: vipune-lib does not run this source's " in apart
    assert "the binary's query vectors are no longer the cached ones" in apart
    assert "query_embedding_parity" in md and "does not run this source's" in md  # gate.md's "worth knowing"


def test_on_the_lib_lane_the_same_checkout_cannot_be_judged_naming_its_stale_copies(edits_run, workflow_env):
    """vipune-lib follows the minimum cosine (compiled) but not the dispatch or the query prefix: the
    gate refuses to judge it there, naming both, and points at the binary."""
    set_config(edits_run, retrievers=LIB)
    snakemake(edits_run, "--cores", "2", env=workflow_env)
    results = edits_run / "results"
    report = json.loads((results / "report.json").read_text())
    assert report["builds_compared_on"] == "vipune-lib"
    assert report["builds"][1]["comparison"]["overall"]["recall@5"]["significant"]  # the cosine's loss, followed
    assert gate.run_gate(results) == gate.CANNOT
    md = (results / "gate.md").read_text()
    assert (
        "the builds are compared on vipune-lib, which does not run this checkout's `fn execute` from "
        "src/commands/mod.rs and `fn prefix_input` from src/embedding/engine.rs (a stale copy"
    ) in md
    assert "judge it on the binary" in md


@pytest.fixture(scope="module")
def recipe_run(release, scenario_inputs, workflow_env, tmp_path_factory) -> tuple[Path, list, dict, dict]:
    """docs/ci/vipune-eval.yml's shell steps with the real build.sh, on the comment's checkout."""
    root = tmp_path_factory.mktemp("gate-recipe")
    workspace = root / "workspace"
    workspace.mkdir()
    (workspace / "vipune-eval").symlink_to(REPO)
    config = make_workdir(root / "config", *scenario_inputs("gate"), scenario="gate") / "config.yaml"
    overrides = {
        "CONFIG": str(config),
        "CORES": "2",
        "BASE_RELEASE": real_vipune.RELEASE,
        "PR_CHECKOUT": str(real_vipune.fixture_tree("VIPUNE_EVAL_GATE_COMMENT_FIXTURE")),
    }
    if os.environ.get("VIPUNE_EVAL_CACHE"):
        overrides["VIPUNE_EVAL_CACHE"] = os.environ["VIPUNE_EVAL_CACHE"]
    else:  # build.sh's own default, where the builds are
        overrides["VIPUNE_EVAL_CACHE"] = str(Path.home() / ".cache" / "vipune-eval")
    env = ci_steps.machine_env(workflow_env, ci_steps.stand_in_gh(root / "gh"))
    return workspace, ci_steps.run(workspace, overrides, env), overrides, env


def test_a_neutral_edit_passes_the_recipes_gate_with_no_pair_moved(recipe_run):
    workspace, ran, _, _ = recipe_run
    failed = [(r.name, r.stderr[-3000:]) for r in ran if r.outcome == "failure"]
    assert not failed, failed
    gate_step = next(r for r in ran if r.name == "The gate")
    assert gate_step.outputs == {"status": "0"}
    assert "vipune-eval gate: pass (exit 0): no measure worse than the baseline; no pair moved" in gate_step.stdout
    report = json.loads((workspace / "run/results/report.json").read_text())
    assert report["builds_compared_on"] == "vipune-lib" and report["builds"][1]["changes"] == []
    assert "vipune-gate-comment" in report["builds"][0]["source"]


def test_a_baseline_searched_on_other_data_cannot_be_judged_naming_the_difference(
    recipe_run, release, scenario_inputs, workflow_env, tmp_path
):
    """The release's lib-lane results restored from a run on other data (the same questions, other
    haystack texts on five pairs: as a cache keyed too loosely would restore them) into a copy of
    the recipe's run: its loop scores them again, and the gate names the difference."""
    workspace, ran, overrides, env = recipe_run
    data, model = scenario_inputs("gate")
    other = json.loads(data.read_text())
    changed = [i for i in other if not i["question_id"].endswith("_abs")][:5]
    for instance in changed:
        instance["haystack_sessions"][0][0]["content"] += " (another dataset's words)"
    (tmp_path / "other.json").write_text(json.dumps(other))
    elsewhere = make_workdir(
        tmp_path / "elsewhere",
        tmp_path / "other.json",
        model,
        scenario="gate",
        retrievers=LIB,
        vipune={"binary": str(release)},
    )
    snakemake(elsewhere, "--cores", "2", env=workflow_env)
    copy = tmp_path / "run"
    shutil.copytree(workspace / "run", copy, symlinks=True, ignore=shutil.ignore_patterns(".lock", "tmp"))
    report = json.loads((copy / "results/report.json").read_text())
    lane_run = Path(report["builds"][1]["run"]).stem  # the release's lane: the same in both runs
    for name in (lane_run, f"{lane_run}-semantic"):
        shutil.rmtree(copy / "results/search" / name)
        shutil.copytree(elsewhere / "results/search" / name, copy / "results/search" / name)
    builds = next(r for r in ran if r.name.startswith("Build the base release"))
    again = ci_steps.run(
        workspace,
        {**overrides, "RUN": str(copy)},
        env,
        outputs={"builds": builds.outputs},
        start_at="The maintainer's loop, the checkout's vipune-lib against the release's",
    )
    steps = {r.name: r for r in again}
    loop = steps["The maintainer's loop, the checkout's vipune-lib against the release's"]
    assert loop.outcome == "success", loop.stderr[-3000:]
    assert steps["The gate"].outputs == {"status": "2"}
    assert steps["The verdict (0 pass, 1 a measure worse, 2 cannot judge)"].returncode == 2
    md = (copy / "results/gate.md").read_text()
    assert (
        f"a stale baseline: {report['builds'][1]['id']} was searched with other data (the question, the "
        f"haystack's sessions or their times: another dataset) on 5 of {report['pairs']} pairs ("
    ) in md
    assert all(i["question_id"] in md for i in changed)
