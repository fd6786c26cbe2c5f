"""docs/ci/vipune-eval.yml, the example GitHub Actions workflow for vipune's repository, run here
as a runner would run it: each step's ``run:`` script with bash as the workflow's default shell
(``bash --noprofile --norc -eo pipefail``), in the workspace, with the environment a runner gives
(GITHUB_WORKSPACE, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, …), the workflow's and the step's ``env:``
(their ``${{ }}`` expressions evaluated: the github, env and steps contexts), ``if:`` conditions
and ``continue-on-error``, and each step's outputs read back from GITHUB_OUTPUT.

What cannot run here is said, never faked: a step that ``uses:`` an action (actions/checkout,
actions/cache, actions/setup-python, actions/upload-artifact, the Rust toolchain) runs on GitHub
only; the test lays out what checkout would (the pull request's vipune and vipune-eval side by
side in the workspace). The install step is this test run's own venv (vipune-eval installed from
this checkout), so it is not run again. ``gh`` is a stand-in on PATH that records the comment.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "docs" / "ci" / "vipune-eval.yml"
INSTALL = "Install vipune-eval"  # the test run's venv is this install
PR = 7
REPOSITORY = "randomm/vipune"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def load() -> dict[str, Any]:
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    workflow["on"] = workflow.pop(True, workflow.get("on"))  # YAML 1.1 reads the key `on` as true
    return workflow


def lookup(name: str, contexts: dict[str, Any]) -> Any:
    """A context value (``github.workspace``, ``env.RUN``, ``steps.gate.outputs.status``); a step
    that did not run, or an output it did not set, is '' as on GitHub; any other unknown name fails."""
    value: Any = contexts
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            if name.startswith("steps."):
                return ""
            raise KeyError(
                f"docs/ci/vipune-eval.yml: {name!r} is no context the test knows (tests/support/ci_steps.py)"
            )
        value = value[part]
    return value


def condition(text: str, contexts: dict[str, Any]) -> bool:
    """An ``if:`` of the forms the workflow uses: terms joined by ``&&``, each ``!cancelled()``,
    ``always()``, ``success()`` or ``<context> != ''`` / ``== ''``."""
    text = text.strip()
    whole = EXPRESSION.fullmatch(text)
    result = True
    for term in (t.strip() for t in (whole[1] if whole else text).split("&&")):
        if term in ("!cancelled()", "always()"):
            continue
        if term == "success()":
            result &= not contexts["job_failed"]
            continue
        compared = re.fullmatch(r"([\w.-]+)\s*(!=|==)\s*'(.*)'", term)
        if not compared:
            raise ValueError(f"docs/ci/vipune-eval.yml: the test cannot evaluate the condition {term!r}")
        value = str(lookup(compared[1], contexts))
        result &= (value != compared[3]) if compared[2] == "!=" else (value == compared[3])
    return result


def evaluate(text: str, contexts: dict[str, Any]) -> str:
    """``text`` with each ``${{ context }}`` replaced by its value."""
    return EXPRESSION.sub(lambda m: str(lookup(m[1], contexts)), str(text))


@dataclass
class Ran:
    name: str
    outcome: str  # success, failure, skipped, github-only, not-run-here
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    outputs: dict[str, str] = field(default_factory=dict)


def _outputs(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT's ``name=value`` lines (and ``name<<DELIMITER`` blocks)."""
    out: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        if "<<" in lines[i] and "=" not in lines[i].split("<<")[0]:
            name, delimiter = lines[i].split("<<", 1)
            end = lines.index(delimiter, i + 1)
            out[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
            continue
        name, _, value = lines[i].partition("=")
        out[name] = value
        i += 1
    return out


def run(
    workspace: Path,
    overrides: dict[str, str],
    env: dict[str, str],
    start_at: str | None = None,
    outputs: dict[str, dict[str, str]] | None = None,
    timeout: float = 1200,
) -> list[Ran]:
    """Run the workflow's one job in ``workspace``: ``overrides`` replace values of the workflow's
    ``env:`` (the config, the cores, build.sh), ``env`` is the machine's environment (PATH with
    vipune-eval, snakemake and the stand-in gh); ``start_at``: the name of the first step to run
    (the earlier ones' ``outputs`` given instead)."""
    workflow = load()
    [job] = workflow["jobs"].values()
    temp = workspace.parent / "runner-temp"
    temp.mkdir(exist_ok=True)
    event = temp / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": PR}}))
    runner = {
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_REPOSITORY": REPOSITORY,
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_STEP_SUMMARY": str(temp / "step-summary.md"),
        "GITHUB_ENV": str(temp / "env"),
        "GITHUB_PATH": str(temp / "path"),
        "GITHUB_ACTIONS": "true",
        "CI": "true",
        "RUNNER_OS": "Linux",
        "RUNNER_TEMP": str(temp),
    }
    contexts: dict[str, Any] = {
        "github": {
            "workspace": str(workspace),
            "repository": REPOSITORY,
            "token": "a-token-the-stand-in-gh-takes",
            "event": {"pull_request": {"number": PR}},
        },
        "steps": {k: {"outputs": v} for k, v in (outputs or {}).items()},
        "job_failed": False,
    }
    contexts["env"] = {k: evaluate(v, contexts) for k, v in workflow["env"].items()}
    contexts["env"].update(overrides)
    shell = workflow["defaults"]["run"]["shell"]
    assert shell == "bash", shell  # GitHub runs it as: bash --noprofile --norc -eo pipefail {0}
    ran: list[Ran] = []
    started = start_at is None
    for number, step in enumerate(job["steps"]):
        name = step.get("name") or step.get("uses")
        started = started or name == start_at
        if not started:
            continue
        if "uses" in step:
            ran.append(Ran(name, "github-only"))
            continue
        if name == INSTALL:
            ran.append(Ran(name, "not-run-here"))
            continue
        if not condition(step.get("if", "success()"), contexts):
            ran.append(Ran(name, "skipped"))
            continue
        output = temp / f"output-{number}"
        output.write_text("")
        script = temp / f"step-{number}.sh"
        script.write_text(step["run"])
        step_env = {k: evaluate(v, contexts) for k, v in (step.get("env") or {}).items()}
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=workspace,
            env={**env, **runner, **contexts["env"], **step_env, "GITHUB_OUTPUT": str(output)},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        outcome = "success" if proc.returncode == 0 else "failure"
        done = Ran(name, outcome, proc.returncode, proc.stdout, proc.stderr, _outputs(output))
        ran.append(done)
        if "id" in step:
            contexts["steps"][step["id"]] = {"outputs": done.outputs, "outcome": outcome}
        if proc.returncode != 0 and not step.get("continue-on-error"):
            contexts["job_failed"] = True
    return ran


def stand_in_gh(folder: Path) -> Path:
    """A ``gh`` that records each call (its arguments, and the body file's text) in ``folder/gh.log``."""
    folder.mkdir(parents=True, exist_ok=True)
    gh = folder / "gh"
    gh.write_text(
        f"#!/usr/bin/env python3\nimport json, sys, os\nargs = sys.argv[1:]\n"
        f'body = open(args[args.index("--body-file") + 1]).read() if "--body-file" in args else None\n'
        f'with open({str(folder / "gh.log")!r}, "a") as log:\n'
        f'    log.write(json.dumps({{"args": args, "body": body, "token": os.environ.get("GH_TOKEN"),\n'
        f'                          "repo": os.environ.get("GH_REPO")}}) + "\\n")\n'
    )
    gh.chmod(0o755)
    return folder


def fake_build_script(folder: Path) -> Path:
    """A stand-in for .ci/vipune/build.sh with its command line (``VERSION`` or ``--checkout DIR
    --fast``) that makes fake builds (tests/support/fakes.py) under $VIPUNE_EVAL_CACHE and prints the
    binary's path; a checkout's FAKE_VIPUNE_FAULT file, if any, is its edit (the fake's faults)."""
    script = folder / "build.sh"
    folder.mkdir(parents=True, exist_ok=True)
    script.write_text(f"""#!{sys.executable}
import os, sys
from pathlib import Path
sys.path.insert(0, {str(REPO / "tests")!r})
from support.fakes import fake_build
cache = Path(os.environ["VIPUNE_EVAL_CACHE"])
if sys.argv[1] == "--checkout":
    checkout = Path(sys.argv[2])
    fault = (checkout / "FAKE_VIPUNE_FAULT").read_text().strip() if (checkout / "FAKE_VIPUNE_FAULT").exists() else ""
    preamble = f"# the checkout {{checkout}}\\n" + (f"FAKE_VIPUNE_FAULT={{fault}} export FAKE_VIPUNE_FAULT\\n" if fault else "")
    binary, _ = fake_build(cache / f"checkout-{{checkout.name}}", preamble=preamble)
else:
    binary, _ = fake_build(cache / f"release-{{sys.argv[1]}}", preamble=f"# the release {{sys.argv[1]}}\\n")
print(binary)
""")
    script.chmod(0o755)
    return script


def machine_env(env: dict[str, str], *folders: Path) -> dict[str, str]:
    """``env`` with ``folders`` and this venv's scripts (vipune-eval, snakemake) first on PATH."""
    return {**env, "PATH": os.pathsep.join([*map(str, folders), str(Path(sys.executable).parent), env["PATH"]])}
