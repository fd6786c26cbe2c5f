"""docs/ci/vipune-eval.yml, the example workflow for vipune's repository (issue 52 item 4): it passes
actionlint, and the test's runner (tests/support/ci_steps.py) knows every expression it uses. Its
shell steps run in tests/workflow/test_ci_steps.py."""

import shutil
import subprocess

import pytest

from support import ci_steps


def actionlint() -> str:
    found = shutil.which("actionlint")
    if not found:
        pytest.skip("no actionlint on PATH: the test extra installs one (pip install -e '.[test]')")
    return found


def test_the_workflow_passes_actionlint():
    proc = subprocess.run(
        [actionlint(), "-no-color", str(ci_steps.WORKFLOW)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_would_see_a_broken_workflow(tmp_path):
    """The check above can fail: a step reading an output of a step that does not exist is refused."""
    broken = tmp_path / "broken.yml"
    broken.write_text(
        ci_steps.WORKFLOW.read_text().replace("steps.builds.outputs.release", "steps.no-such-step.outputs.release")
    )
    proc = subprocess.run([actionlint(), "-no-color", str(broken)], capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "no-such-step" in proc.stdout


def test_the_recipe_builds_runs_the_loop_gates_uploads_and_posts():
    """What issue 52 asks of the recipe, step by step, in the workflow itself."""
    workflow = ci_steps.load()
    assert list(workflow["on"]) == ["pull_request"]
    [job] = workflow["jobs"].values()
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    uses = [step["uses"].split("@")[0] for step in job["steps"] if "uses" in step]
    assert uses.count("actions/cache") == 2  # the data, model and vectors; the base release's build
    assert '"$BUILD" --checkout "$PR_CHECKOUT" --fast' in runs and '"$BUILD" "$BASE_RELEASE"' in runs
    assert "'retrievers=[vipune-lib,vipune-lib-semantic]'" in runs and "compare: [$RELEASE]" in runs
    assert 'vipune-eval gate --run "$RUN/results"' in runs and "gh pr comment" in runs
    assert "actions/upload-artifact" in uses and 'exit "$STATUS"' in runs
    upload = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact"))
    assert "${{ env.RUN }}/results/html" in upload["with"]["path"]  # the page gate.md links into
    checkout = job["steps"][0]
    assert workflow["env"]["PR_CHECKOUT"] == "${{ github.workspace }}/" + checkout["with"]["path"]


def test_every_expression_of_the_workflow_is_one_the_test_runner_evaluates():
    workflow = ci_steps.load()
    [job] = workflow["jobs"].values()
    contexts = {
        "github": {"workspace": "/w", "repository": "r", "token": "t", "event": {"pull_request": {"number": 1}}},
        "steps": {},
        "job_failed": False,
    }
    contexts["env"] = {k: ci_steps.evaluate(v, contexts) for k, v in workflow["env"].items()}
    for step in job["steps"]:
        for value in [*(step.get("env") or {}).values(), *(step.get("with") or {}).values()]:
            if "hashFiles" not in str(value):  # GitHub's own function, in the cache keys
                ci_steps.evaluate(value, contexts)
        if "if" in step:
            ci_steps.condition(step["if"], contexts)
