"""The recipe for vipune's CI (issue 52 item 4): docs/ci/vipune-eval.yml's shell steps, run as a
runner runs them (tests/support/ci_steps.py) on a workspace laid out as its checkout steps lay it
(the pull request's vipune beside vipune-eval), with fake builds standing in for build.sh (the
real builds: tests/workflow/test_gate_real.py). The steps that use GitHub's actions (checkout,
cache, setup-python, the Rust toolchain, upload-artifact) run on GitHub only, and the install is
this test run's own venv."""

import json

from support import ci_steps
from support.scenarios import REPO, make_workdir


def test_the_recipes_shell_steps_build_run_the_loop_gate_and_post_the_comment(tmp_path, scenario_inputs, workflow_env):
    workspace = tmp_path / "workspace"
    (workspace / "vipune").mkdir(parents=True)  # the pull request's checkout: here a neutral edit
    (workspace / "vipune" / "Cargo.lock").write_text("")
    (workspace / "vipune-eval").symlink_to(REPO)
    config = make_workdir(tmp_path / "config", *scenario_inputs("builds"), scenario="builds") / "config.yaml"
    overrides = {
        "CONFIG": str(config),
        "CORES": "2",
        "VIPUNE_EVAL_CACHE": str(tmp_path / "cache"),
        "BUILD": str(ci_steps.fake_build_script(tmp_path / "fake-build")),
    }
    env = ci_steps.machine_env(workflow_env, ci_steps.stand_in_gh(tmp_path / "gh"))
    ran = ci_steps.run(workspace, overrides, env)

    outcomes = {r.name: r.outcome for r in ran}
    assert [r.name for r in ran if r.outcome == "github-only"] == [
        "The pull request's checkout of vipune",
        "vipune-eval",
        "actions/setup-python@v5",
        "Rust (vipune's MSRV, 1.92, or newer)",
        "The data, the model and the vectors, cached by their pins",
        "The base release's build and cargo's compiled crates",
        "Upload the report",
    ]
    assert outcomes[ci_steps.INSTALL] == "not-run-here"
    failed = [(r.name, r.stdout[-2000:], r.stderr[-3000:]) for r in ran if r.outcome == "failure"]
    assert not failed, failed
    builds = next(r for r in ran if r.name.startswith("Build the base release"))
    assert set(builds.outputs) == {"release", "checkout"}
    gate = next(r for r in ran if r.name == "The gate")
    assert (
        gate.outputs == {"status": "0"}
        and "vipune-eval gate: pass (exit 0): no measure worse than the baseline; no pair moved" in gate.stdout
    )
    results = workspace / "run" / "results"
    md = (results / "gate.md").read_text()
    assert md.startswith("## ✅ vipune-eval gate: pass (exit 0)")
    assert md in (tmp_path / "runner-temp" / "step-summary.md").read_text()
    [call] = [json.loads(line) for line in (tmp_path / "gh" / "gh.log").read_text().splitlines()]
    assert call["args"] == ["pr", "comment", str(ci_steps.PR), "--edit-last", "--body-file", str(results / "gate.md")]
    assert call["body"] == md and call["repo"] == ci_steps.REPOSITORY and call["token"]
    assert outcomes["The verdict (0 pass, 1 a measure worse, 2 cannot judge)"] == "success"
    report = json.loads((results / "report.json").read_text())
    assert report["builds_compared_on"] == "vipune-lib" and len(report["builds"]) == 2

    # A run the gate cannot judge: its verdict step fails the job with the gate's status, after the comment.
    config_json = results / "config.json"
    config_json.write_text(json.dumps({k: v for k, v in json.loads(config_json.read_text()).items() if k != "gate"}))
    again = ci_steps.run(workspace, overrides, env, start_at="The gate", outputs={"builds": builds.outputs})
    verdict = {r.name: r for r in again}
    assert verdict["The gate"].outputs == {"status": "2"} and verdict["The gate"].outcome == "success"
    assert verdict["Post gate.md on the pull request"].outcome == "success"
    assert verdict["The verdict (0 pass, 1 a measure worse, 2 cannot judge)"].returncode == 2
    assert "cannot judge" in (results / "gate.md").read_text()
