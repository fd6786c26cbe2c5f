"""core/model_files.py: the model a job loads, one settings object shared by the embed stage and the
preflight (issue 55 item 3: a type in core/, not the preflight reaching into embed for it)."""

from pathlib import Path

from vipune_eval import cli
from vipune_eval.core.model_files import ModelFiles


def test_the_cli_builds_it_for_both_commands_that_load_the_model():
    model = ["--model-dir", "m", "--file", "onnx/model.onnx", "--pooling", "mean"]
    _, _, embed = cli.stage_call(
        [
            "embed",
            "--texts",
            "t",
            *model,
            "--shard",
            "0",
            "--shards",
            "1",
            "--out",
            "e",
            "--model-fingerprint",
            "fp",
            "--store",
            "v",
            "--threads",
            "1",
            "--batch-tokens",
            "auto",
        ]
    )
    _, _, preflight = cli.stage_call(
        [
            "preflight",
            "--binary",
            "vipune",
            "--fingerprint",
            "fp",
            "--timeout",
            "1",
            "--tmp",
            "t",
            "--hf-home",
            "h",
            *model,
            "--out",
            "p",
            "--mode",
            "record",
        ]
    )
    assert embed["model"] == preflight["model"] == ModelFiles(Path("m"), "onnx/model.onnx", "mean")


def test_it_names_the_recipe_as_the_preflight_reports_it():
    assert str(ModelFiles(Path("m"), "onnx/model.onnx", "mean")) == "m/onnx/model.onnx with mean pooling + L2"
