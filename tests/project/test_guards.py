"""The guards (issue 53): pre-commit runs what CI runs. Each hook of .pre-commit-config.yaml is a
command of .ci/guards, with the same arguments, and CI runs .ci/guards before the tests."""

import shlex
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def guard_commands() -> list[list[str]]:
    lines = (REPO / ".ci/guards").read_text().splitlines()
    return [shlex.split(line)[2:] for line in lines if line.startswith("guard ")]


def test_every_hook_runs_a_command_of_the_ci_guards():
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    hooks = [hook for repo in config["repos"] for hook in repo["hooks"]]
    commands = guard_commands()
    assert len(hooks) == len(commands) == 5
    for hook in hooks:
        assert hook["language"] == "system"  # the lint extra's versions, not a second pin
        entry = [word for word in shlex.split(hook["entry"]) if word != "--force-exclude"]
        # a hook given file names checks those; CI's guard checks the whole tree
        assert any(command[: len(entry)] == entry for command in commands), (hook["id"], entry, commands)


def test_ci_runs_the_guards_before_the_tests_with_the_lint_extra():
    run = (REPO / ".ci/run").read_text()
    assert "pip install -q -e '.[lint]'" in run
    assert run.index(".ci/guards ||") < run.index("\npytest\n")
