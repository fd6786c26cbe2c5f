"""Stage settings are typed objects (issue 21): the CLI turns the options every search, vipune or
model command shares into one frozen ShardSearch / VipuneSettings / ModelFiles, so a stage takes a few named
objects, not a dozen loose parameters."""

import dataclasses
import inspect
from pathlib import Path

import pytest

from vipune_eval import cli
from vipune_eval.core.model_files import ModelFiles
from vipune_eval.core.persona import ShardSearch
from vipune_eval.core.ranking_settings import RankingSettings
from vipune_eval.vipune.settings import VipuneSettings

SEARCH = [
    "--rows",
    "r.parquet",
    "--texts",
    "t.parquet",
    "--embeddings",
    "e0.parquet",
    "e1.parquet",
    "--shard",
    "1",
    "--shards",
    "3",
    "--limit",
    "10",
    "--depth",
    "10",
]
BINARY = ["--binary", "vipune", "--fingerprint", "fp.json", "--hf-home", "hf", "--tmp", "scratch", "--timeout", "12.5"]


def test_a_vipune_search_command_reaches_its_stage_as_two_settings_objects():
    command, stage, kwargs = cli.stage_call(
        [
            "search-vipune",
            *SEARCH,
            "--no-collapse",
            *BINARY,
            "--threads",
            "2",
            "--on-error",
            "stop",
            "--cache",
            "c",
            "--out",
            "o.run",
            "--semantic-out",
            "s.run",
            "--status-out",
            "st.json",
        ]
    )
    assert command == "search-vipune" and stage.__name__ == "run_vipune"
    assert kwargs["shard"] == ShardSearch(
        Path("r.parquet"),
        Path("t.parquet"),
        (Path("e0.parquet"), Path("e1.parquet")),
        1,
        3,
        RankingSettings(10, 10, collapse=False),
    )
    assert kwargs["vipune"] == VipuneSettings("vipune", Path("fp.json"), Path("hf"), Path("scratch"), 12.5)
    assert set(kwargs) == set(inspect.signature(stage).parameters) - {"on_error"} | {"on_error"}
    assert not {"rows", "shards", "binary", "hf_home", "timeout"} & set(kwargs)  # no loose copies


@pytest.mark.parametrize(
    "command, extra, settings",
    [
        ("search-arms", ["--arms-out", "a.parquet"], {"shard": ShardSearch}),
        ("search-family", ["--retriever", "bm25-lme", "--out", "o.run"], {"shard": ShardSearch}),
        ("search-plugin", ["--retriever", "x.py:f", "--timeout", "300", "--out", "o.run"], {"shard": ShardSearch}),
        (
            "preflight",
            ["--model-dir", "m", "--file", "model.onnx", "--pooling", "mean", "--out", "p.json", "--mode", "enforce"],
            {"vipune": VipuneSettings, "model": ModelFiles},
        ),
    ],
)
def test_every_search_and_vipune_command_gets_its_settings_object(command, extra, settings):
    argv = [command, *(BINARY if command == "preflight" else SEARCH), *extra]
    _, stage, kwargs = cli.stage_call(argv)
    for keyword, kind in settings.items():
        assert isinstance(kwargs[keyword], kind)
        assert inspect.signature(stage).parameters[keyword].annotation in (kind.__name__, kind)
    assert set(kwargs) <= set(inspect.signature(stage).parameters)


def test_the_embed_command_gets_the_model_as_one_object():
    _, stage, kwargs = cli.stage_call(
        [
            "embed",
            "--texts",
            "t.parquet",
            "--model-dir",
            "m",
            "--file",
            "onnx/model.onnx",
            "--pooling",
            "mean",
            "--shard",
            "0",
            "--shards",
            "2",
            "--out",
            "e.parquet",
            "--model-fingerprint",
            "fp.json",
            "--store",
            "v",
            "--threads",
            "2",
            "--batch-tokens",
            "auto",
        ]
    )
    assert stage.__name__ == "run_embed"
    assert kwargs["model"] == ModelFiles(Path("m"), "onnx/model.onnx", "mean")
    assert str(kwargs["model"]) == "m/onnx/model.onnx with mean pooling + L2"  # the recipe, as preflight names it


def test_settings_are_frozen_and_no_stage_takes_a_dozen_parameters():
    shard = ShardSearch(Path("r"), Path("t"), [Path("e")], 0, 1, RankingSettings(10, 10))
    assert shard.embeddings == (Path("e"),)  # a list from argparse is kept as a tuple
    with pytest.raises(dataclasses.FrozenInstanceError):
        shard.shard = 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        shard.ranking_settings.limit = 5  # type: ignore[misc]
    for command in cli.COMMANDS.values():
        stage = cli._load(command.target)
        assert len(inspect.signature(stage).parameters) <= 10, command.target


def test_the_config_defaults_live_in_the_schema_alone():
    """An option the rules always pass is required: a default of its own would be a second copy
    of the schema's, and the two could drift (issue 36). What is left with a default is a flag
    or something only a person types (report-html's folder, a download's pins)."""
    import argparse
    import re

    from support.scenarios import REPO

    rules = "".join(p.read_text() for p in (REPO / "workflow" / "rules").glob("*.smk"))
    parsers = cli.parser()._subparsers._group_actions[0].choices
    for command, sub in parsers.items():
        shell = re.findall(rf'"vipune-eval {command} (.*?)2> {{log:q}}', rules.replace('"\n        "', ""), re.S)
        for action in sub._actions:
            flag = max(action.option_strings, key=len, default="")
            if (
                not shell
                or not flag
                or isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction))
            ):
                continue
            if re.search(rf"{flag}[ =]", shell[0]) and action.nargs not in ("*",):
                assert action.required, f"vipune-eval {command} {flag}: the rule always passes it; no default"


def test_every_rule_is_named_after_the_command_it_runs():
    """One name per step (issue 36): rule search_arms runs `vipune-eval search-arms`, and so on."""
    import re

    from support.scenarios import REPO

    rules = "\n".join(p.read_text() for p in (REPO / "workflow" / "rules").glob("*.smk"))
    blocks = re.findall(r"^\s*rule (\w+):\n(.*?)(?=^\s*rule |\Z)", rules, re.M | re.S)
    ran = {rule: re.search(r'"vipune-eval ([\w-]+)', body) for rule, body in blocks}
    assert {rule: m.group(1) for rule, m in ran.items() if m and m.group(1).replace("-", "_") != rule} == {}
    after_a_run = {"report-html", "gate", "explain"}  # a person (or a CI) runs these on a finished run: no rule does
    developers = {"generated-docs"}  # a developer runs it in a checkout
    assert {m.group(1) for m in ran.values() if m} | after_a_run | developers == set(cli.COMMANDS)


def test_the_gate_exits_with_its_verdict(tmp_path, capsys):
    """A command may return its exit status (the gate: 2 cannot judge a folder without a run)."""
    assert cli.COMMANDS["gate"].exits and not cli.COMMANDS["report"].exits
    assert cli.main(["gate", "--run", str(tmp_path)]) == 2
    assert "vipune-eval gate: cannot judge (exit 2)" in capsys.readouterr().out
