"""``vipune-eval <command>``: one subcommand per workflow stage, so each runs by hand too.

The CLI only parses: each command names its stage function (``module:function``, imported when
the command runs) and calls it with the parsed options as keyword arguments. Options shared by
several commands are defined once, in the parent parsers below; a parent that stands for a
stage setting (``SETTINGS``) reaches the stage as one typed, frozen object, not loose options.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vipune_eval.errors import EvalError


@dataclass(frozen=True)
class Command:
    target: str  # "module:function" of the stage
    help: str
    parents: tuple[str, ...] = ()
    options: Callable[[argparse.ArgumentParser], None] | None = None
    exits: bool = False  # the stage returns the command's exit status (the gate's verdict)


def _parents() -> dict[str, argparse.ArgumentParser]:
    def parent(*specs: tuple[list[str], dict[str, Any]]) -> argparse.ArgumentParser:
        p = argparse.ArgumentParser(add_help=False)
        for flags, kwargs in specs:
            p.add_argument(*flags, **kwargs)
        return p

    path: dict[str, Any] = {"type": Path, "required": True}
    build: list[tuple[list[str], dict[str, Any]]] = [
        (["--binary"], {"required": True}),
        (["--fingerprint"], path),
        (["--timeout"], {"type": float, "required": True, "help": "seconds per vipune call"}),
        (["--tmp"], {**path, "help": "this job's scratch folder"}),
    ]
    return {
        "view": parent(
            (["--protocol"], {"choices": ["seed", "official"], "required": True}),
            (["--granularity"], {"required": True, "help": "a name of registry.granularities"}),
        ),
        "shard": parent(
            (["--shard"], {"type": int, "required": True}), (["--shards"], {"type": int, "required": True})
        ),
        "search": parent((["--rows"], path), (["--texts"], path), (["--embeddings"], {**path, "nargs": "+"})),
        # what a view ranks to (core.ranking_settings.RankingSettings.options writes these for every search rule)
        "ranking": parent(
            (["--limit"], {"type": int, "required": True, "help": "vipune --limit"}),
            (["--depth"], {"type": int, "required": True, "help": "documents kept per pair in the run"}),
            (
                ["--no-collapse"],
                {"dest": "collapse", "action": "store_false", "help": "keep every row as its own document"},
            ),
        ),
        # what a view scores (registry.views.View's ks and measures)
        "scoring": parent(
            (["--ks"], {"type": int, "nargs": "+", "required": True}),
            (["--measures"], {"dest": "measure_names", "nargs": "+", "required": True}),
            (["--turn-to-session"], {"action": "store_true", "help": "LongMemEval's turn→session scoring"}),
        ),
        "model": parent((["--model-dir"], path), (["--file"], {"required": True}), (["--pooling"], {"required": True})),
        # a vipune build as both lanes run it (vipune.settings.VipuneSettings); the lib lane has no model
        "binary": parent(*build, (["--hf-home"], {**path, "help": "the model, where vipune reads it"})),
        "lib": parent(*build),
        # the lib lane's kept stores (stages.search.kept_stores.Keeping)
        "stores": parent(
            (["--kept-stores"], {**path, "help": "the folder of the personas' databases as seeded"}),
            (
                ["--kept-stores-gb"],
                {"type": float, "required": True, "help": "what that folder may hold (0: none kept)"},
            ),
        ),
        "repo": parent((["--repo-id"], {"required": True}), (["--revision"], {"required": True})),
        "hub": parent(
            (
                ["--timeout"],
                {"type": float, "required": True, "help": "seconds to connect, and for each read (download.timeout)"},
            ),
            (
                ["--stall-timeout"],
                {
                    "type": float,
                    "required": True,
                    "help": "seconds a transfer may go without a new MB (download.stall_timeout)",
                },
            ),
        ),
    }


# Parent parser → (keyword, "module:Class"): the options named by the class's fields (its own,
# and for a search command the shard parent's) become one settings object, in this order: a field
# that names an earlier one's keyword (ShardSearch's and Scoring's ``ranking_settings``) takes it.
SETTINGS = {
    "ranking": ("ranking_settings", "core.ranking_settings:RankingSettings"),
    "search": ("shard", "core.persona:ShardSearch"),
    "scoring": ("scoring", "stages.score:Scoring"),
    "binary": ("vipune", "vipune.settings:VipuneSettings"),
    "lib": ("vipune", "vipune.settings:VipuneSettings"),
    "stores": ("keeping", "stages.search.kept_stores:Keeping"),
    "model": ("model", "core.model_files:ModelFiles"),
    "hub": ("limits", "stages.download:HubLimits"),
}


def _load(target: str) -> Any:
    module, name = target.split(":")
    return getattr(importlib.import_module(f"{__package__}.{module}"), name)


def stage_call(argv: list[str]) -> tuple[str, Callable[..., Any], dict[str, Any]]:
    """(command, its stage function, the keyword arguments it is called with) for a command line."""
    args = vars(parser().parse_args(argv))
    command = args.pop("command")
    for parent in [p for p in SETTINGS if p in COMMANDS[command].parents]:
        keyword, target = SETTINGS[parent]
        settings = _load(target)
        # a field its parent lacks is None (the lib lane's parent has no model: hf_home)
        args[keyword] = settings(**{f.name: args.pop(f.name, None) for f in dataclasses.fields(settings)})
    return command, _load(COMMANDS[command].target), args


def _expected_value(text: str) -> dict[str, int] | None:
    if text in ("", "none", "null"):
        return None
    try:
        return {k: int(v) for k, v in (item.split("=") for item in text.split(","))}
    except ValueError:
        raise argparse.ArgumentTypeError(f"--expected takes instances=N,abstention=N,pairs=N, got {text!r}") from None


def _batch_tokens(text: str) -> int | str:
    if text == "auto":
        return text
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"--batch-tokens takes auto or a number of tokens above 0, got {text!r}")


def _opt(*specs: tuple[list[str], dict[str, Any]]) -> Callable[[argparse.ArgumentParser], None]:
    def add(p: argparse.ArgumentParser) -> None:
        for flags, kwargs in specs:
            p.add_argument(*flags, **kwargs)

    return add


P = {"type": Path, "required": True}
COMMANDS: dict[str, Command] = {
    "download-dataset": Command(
        "stages.download:download_dataset",
        "fetch the LongMemEval file, verify sha256",
        ("repo", "hub"),
        _opt(
            (["--filename"], {"required": True}),
            (["--sha256"], {}),
            (["--size"], {"type": int}),
            (["--dest"], P),
            (["--fingerprint-out"], P),
        ),
    ),
    "download-model": Command(
        "stages.download:download_model",
        "fetch the model files at the pinned revision",
        ("repo", "hub"),
        _opt(
            (["--file"], {"required": True}),
            (["--pooling"], {"required": True}),
            (["--sha256"], {"action": "append", "metavar": "FILE=HASH"}),
            (["--dest"], P),
            (["--fingerprint-out"], P),
        ),
    ),
    "vipune-home": Command(
        "vipune.home:build_vipune_hf_home",
        "lay the model out as the hf-hub cache vipune reads",
        ("repo",),
        _opt((["--model-dir"], P), (["--file"], {"required": True}), (["--out"], P)),
    ),
    "planned-file": Command(
        "plan.planned_file:run_planned_file",
        "put a file of the plan (a fingerprint, the report's manifest) the run staged in place",
        (),
        _opt((["--sha256"], {"required": True, "help": "its text's sha256"}), (["--out"], P)),
    ),
    "vipune-binary": Command(
        "vipune.binary:resolve_binary",
        "fail with a clear message when vipune is not found",
        (),
        _opt((["--binary"], {"required": True})),
    ),
    "filter-pairs": Command(
        "stages.filter.pairs:run_pairs",
        "a view's pairs (gold, split), qrels and counts",
        ("view",),
        _opt(
            (["--dataset"], P),
            (["--pairs-out"], P),
            (["--qrels-out"], P),
            (["--summary-out"], P),
            (["--split-seed"], {"type": int, "required": True}),
            (["--dev-fraction"], {"type": float, "required": True}),
            (["--expected"], {"type": _expected_value, "default": None, "help": "instances=N,abstention=N,pairs=N"}),
        ),
    ),
    "filter-rows": Command(
        "stages.filter.rows:run_rows",
        "a view's memory rows and unique texts",
        ("view",),
        _opt(
            (["--dataset"], P),
            (["--rows-out"], P),
            (["--texts-out"], P),
            (["--tokenizer"], {"type": Path, "help": "tokenizer.json (chunk rows)"}),
        ),
    ),
    "embed": Command(
        "stages.embed.embed:run_embed",
        "embed one shard of a view's unique texts to Parquet",
        ("model", "shard"),
        _opt(
            (["--texts"], P),
            (["--out"], P),
            (["--threads"], {"type": int, "required": True}),
            (
                ["--batch-tokens"],
                {
                    "type": _batch_tokens,
                    "required": True,
                    "help": "tokens per model call (texts of one length); auto: the provider's measured best",
                },
            ),
            (["--cuda"], {"action": "store_true"}),
            (["--model-fingerprint"], P),
            (["--store"], {**P, "help": "the vector store shared by every view"}),
        ),
    ),
    "search-arms": Command(
        "stages.search.arms:run_arms",
        "a shard's shared arms (dense, one bm25 per query form), computed once",
        ("search", "ranking", "shard"),
        _opt((["--arms-out"], {**P, "help": "the arms file fusions read"})),
    ),
    "fuse-reference": Command(
        "stages.search.fuse_reference:run_fuse_reference",
        "one family setting's runs from the shards' arms",
        ("ranking",),
        _opt(
            (["--arms"], {**P, "nargs": "+"}),
            (["--retriever"], {"required": True, "help": "preset name or spec JSON"}),
            (["--rank-all"], {"action": "store_true"}),
            (["--outputs"], {**P, "nargs": "+"}),
        ),
    ),
    "search-family": Command(
        "stages.search.family:run_family",
        "a family that ranks from the persona's own texts over one shard of personas",
        ("search", "ranking", "shard"),
        _opt(
            (["--retriever"], {"required": True, "help": "preset name or spec JSON"}),
            (["--rank-all"], {"action": "store_true", "help": "rank every row"}),
            (["--out"], P),
        ),
    ),
    "search-plugin": Command(
        "stages.search.plugin:run_plugin",
        "a plugin retriever over one shard of personas",
        ("search", "ranking", "shard"),
        _opt(
            (["--retriever"], {"required": True, "help": "the plugin's spec JSON"}),
            (["--timeout"], {"type": float, "required": True, "help": "seconds one question may take"}),
            (["--out"], P),
        ),
    ),
    "search-vipune": Command(
        "stages.search.vipune:run_vipune",
        "the vipune binary over one shard of personas",
        ("search", "ranking", "shard", "binary"),
        _opt(
            (["--threads"], {"type": int, "required": True}),
            (["--on-error"], {"choices": ["stop", "record"], "required": True}),
            (["--cache"], {**P, "help": "finished personas (reused on a resume)"}),
            (["--out"], P),
            (["--semantic-out"], P),
            (["--status-out"], P),
        ),
    ),
    "search-vipune-lib": Command(
        "stages.search.vipune_lib:run_vipune_lib",
        "vipune's own search code (vipune-lane) over one shard of personas",
        ("search", "ranking", "shard", "lib", "stores"),
        _opt(
            (["--lane"], {**P, "help": "the vipune-lane built beside the binary"}),
            (["--lane-fingerprint"], {**P, "help": "the vipune-lane's fingerprint file"}),
            (["--on-error"], {"choices": ["stop", "record"], "required": True}),
            (["--out"], P),
            (["--semantic-out"], P),
            (["--status-out"], P),
            (["--arms-out"], {**P, "help": "the arms each hybrid search fused (what explain shows)"}),
        ),
    ),
    "preflight": Command(
        "stages.search.preflight:run_preflight",
        "check a vipune binary's contract and embedding parity",
        ("binary", "model"),
        _opt((["--out"], P), (["--mode"], {"choices": ["enforce", "record"], "required": True})),
    ),
    "score": Command(
        "stages.score:run_score",
        "merge a run's shards and compute its metrics",
        ("scoring", "ranking"),
        _opt(
            (["--qrels"], P),
            (["--pairs"], P),
            (["--runs"], {**P, "nargs": "*"}),
            (["--status"], {"type": Path, "nargs": "*", "default": []}),
            (["--name"], {"required": True}),
            (["--run-out"], P),
            (["--metrics-out"], P),
        ),
    ),
    "report": Command(
        "stages.report.report:run_report",
        "collect metrics and provenance into report.json / report.md",
        (),
        _opt(
            (["--manifest"], P),
            (["--out-json"], P),
            (["--out-md"], P),
            (["--out-summary"], {**P, "help": "what a finished run prints last"}),
        ),
    ),
    "report-page": Command(
        "stages.report.report_page:run_page",
        "the report as HTML with each plot beside its numbers, and the HTML report's first page",
        (),
        _opt(
            (["--report"], P),
            (["--plots"], {"type": Path, "nargs": "*", "default": []}),
            (["--out-page"], P),
            (["--out-front"], P),
        ),
    ),
    "report-html": Command(
        "stages.report.report_html:run_report_html",
        "Snakemake's HTML report of a finished run, from the run's own config",
        (),
        _opt(
            (
                ["--directory"],
                {"type": Path, "default": Path("."), "help": "the run's working directory (default: here)"},
            ),
            (
                ["--snakefile"],
                {
                    "type": Path,
                    "default": None,
                    "help": "the workflow's Snakefile (default: workflow/Snakefile beside this package)",
                },
            ),
        ),
    ),
    "gate": Command(
        "stages.report.gate:run_gate",
        "a finished comparison of vipune builds as a verdict: exit 0 pass, 1 worse, 2 cannot judge; "
        "writes gate.md (a pull-request comment) and gate.xml (JUnit)",
        (),
        _opt(
            (
                ["--run"],
                {
                    "type": Path,
                    "default": Path("results"),
                    "help": "the finished run's results folder (default: results)",
                },
            )
        ),
        exits=True,
    ),
    "explain": Command(
        "stages.report.explain:run_explain",
        "why a question ranked as it did in each vipune build of a finished run (no search runs)",
        (),
        _opt(
            (["question_id"], {"help": "the question's id (LongMemEval's question_id)"}),
            (
                ["--run"],
                {"type": Path, "default": Path("results"), "help": "the run's results folder (default: results)"},
            ),
        ),
    ),
    "generated-docs": Command(
        "generated_docs:run_generated_docs",
        "a developer's command: rewrite the docs generated from the registries and the modules "
        "(docs/registry.md, CONTRIBUTING.md's package map, docs/extending.md's presets)",
        (),
        _opt((["--check"], {"action": "store_true", "help": "write nothing; fail naming each stale page"})),
    ),
    "plots": Command(
        "stages.report.plots:run_plots",
        "PNG plots of a report",
        (),
        _opt(
            (["--report"], P),
            (["--out-dir"], P),
            (["--plots"], {"nargs": "+", "required": True, "help": "names of the plots to draw"}),
        ),
    ),
}


def parser() -> argparse.ArgumentParser:
    parents = _parents()
    p = argparse.ArgumentParser(prog="vipune-eval", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        s = sub.add_parser(name, help=command.help, parents=[parents[k] for k in command.parents])
        if command.options:
            command.options(s)
    return p


def main(argv: list[str] | None = None) -> int:
    command, stage, kwargs = stage_call(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    try:
        status = stage(**kwargs)
    except EvalError as exc:
        print(exc.shown(command), file=sys.stderr)
        return 1
    return status if COMMANDS[command].exits else 0
