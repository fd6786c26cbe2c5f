"""An edit reruns what it changes (issues 11, 28).

Each rule's code version hashes the package modules its ``vipune-eval <command>`` reaches
(vipune_eval.plan.codeversion), so a module reached by a command it has no business in reruns that
command's jobs, and everything below them, whenever it is edited. The fast tests hold every
command to a budget of modules written from what the command means (the filter may not reach
report code, the downloads may not reach the vipune client, ...); a stray import fails them. The
workflow's dry runs (tests/workflow/test_code_tracking.py) edit a module in a copy of the
repository: the edits a maintainer makes most (the projection's text, the dev/test split, the
vipune client, a measure, the report's Markdown) rerun exactly the rules that reach them and their
downstream.
"""

import ast
import dataclasses
import shutil
from pathlib import Path

import pytest

from support.rerun_plan import EDITS, RULE, reruns, tracked_rules
from support.scenarios import REPO
from vipune_eval.cli import COMMANDS
from vipune_eval.plan import codeversion
from vipune_eval.plan.codeversion import _import_statements, code_version, command_modules, import_graph
from vipune_eval.registry import granularities

PACKAGE = REPO / "vipune_eval"

# What every command runs: the entry, the errors, the file helpers (and the packages' __init__s).
ENTRY = {"__init__", "__main__", "cli", "errors", "core.io"}
FILTER_COMMON = {"stages.filter.reader", "stages.filter.official", "registry.granularities", "core.longmemeval"}
EMBED = {
    "stages.embed.embed",
    "stages.embed.store",
    "stages.embed.onnx_graph",
    "stages.embed.tally",
    "stages.embed.provider",
    "core.tokens",
    "core.model_files",
}
SHARD = {
    "core.persona",
    "core.ranking_settings",
    "core.trec",
}  # a shard of personas in (ranked to a view's settings), TREC run files out
FAILED = {"core.failed_pair"}  # a failed pair's fields: the vipune searches write them, score and report read them
# A vipune build's records (its fingerprint, its vipune-lane's, its preflight): their writers and the report
BUILD_RECORDS = {"core.build_records"}
# The report's words: report.json's shape and the document's sections, one module per thing drawn;
# the shapes it holds that another stage writes are that writer's (the fingerprints, the build
# records, the filter's summary, the embed throughput, a run's metrics, the model's provenance)
SECTIONS = BUILD_RECORDS | {
    "stages.report.report_json",
    "core.fingerprints",
    "core.model_provenance",
    "core.filter_summary",
    "core.embed_throughput",
    "core.run_metrics",
    "core.failed_pair",
    "core.report_inputs",
    "core.ranking_settings",
    *(
        f"stages.report.sections.{m}"
        for m in (
            "agreement",
            "by_view",
            "contents",
            "explanations",
            "lab",
            "misses",
            "orders",
            "overall",
            "provenance",
            "tables",
            "throughput",
            "vipune_builds",
            "warnings",
        )
    ),
}
# An explanation: the lib lane's arms file, the row ids (the fusion's tie-break), the report's words
EXPLAIN = {
    "stages.report.explain",
    "core.lane_arms",
    "core.persona",
    "stages.report.summary",
    "stages.report.document",
    "core.report_inputs",
    "core.paths",
    "registry.measures",
    "registry.lanes",
}
BUDGET = {  # command → the modules (besides ENTRY) it may reach, from what it does
    # the downloads fetch and fingerprint files: no vipune code, no registry, no later stage
    "download-dataset": {"stages.download", "core.fingerprints"},
    "download-model": {"stages.download", "core.fingerprints"},
    # the model laid out where vipune looks: the layout only, not the client
    "vipune-home": {"vipune.home", "core.fingerprints"},
    "vipune-binary": BUILD_RECORDS | {"vipune.binary", "vipune.client", "core.process", "vipune.settings"},
    # a file of the plan put in place: where the run staged its text, nothing that computes it
    "planned-file": {"plan.planned_file", "core.paths"},
    # pairs and their labels (gold, split, qrels) and their counts (the summary's shape), never the
    # rows, chunking or anything downstream
    "filter-pairs": FILTER_COMMON | {"stages.filter.pairs", "stages.filter.split", "core.trec", "core.filter_summary"},
    # rows and texts (what embed and search read), never the pairs' labels or the split
    "filter-rows": FILTER_COMMON | {"stages.filter.rows", "stages.filter.chunking", "core.tokens"},
    # the model and the store; the tally it writes, never the report's projection from it
    "embed": EMBED,
    # the shared arms: their names only, never the retrievers' registry (its presets, descriptions)
    "search-arms": SHARD | {"stages.search.arms", "registry.shared_arms"},
    # family settings and plugins: the registry (to read the spec), the ranking functions and
    # vipune's contract constants, never the client
    "fuse-reference": SHARD
    | {
        "stages.search.fuse_reference",
        "stages.search.arms",
        "stages.search.rankers",
        "registry.retrievers",
        "registry.shared_arms",
        "registry.lanes",
        "vipune.contract",
    },
    "search-family": SHARD
    | {
        "stages.search.family",
        "stages.search.rankers",
        "registry.retrievers",
        "registry.shared_arms",
        "registry.lanes",
        "vipune.contract",
    },
    # the plugin loader is here, where the job's code version sees it
    "search-plugin": SHARD
    | {"stages.search.plugin", "registry.retrievers", "registry.shared_arms", "registry.lanes", "vipune.contract"},
    # the binary: its client, import format, fingerprint check and contract
    "search-vipune": SHARD
    | FAILED
    | BUILD_RECORDS
    | {
        "stages.search.vipune",
        "vipune.client",
        "vipune.binary",
        "core.process",
        "vipune.import_format",
        "vipune.contract",
        "registry.lanes",
        "vipune.settings",
    },
    # vipune's own search code through the vipune-lane, with the binary's settings (its search flags):
    # never the binary's client, import format or model
    "search-vipune-lib": SHARD
    | FAILED
    | BUILD_RECORDS
    | {
        "stages.search.vipune_lib",
        "vipune.vipune_lane",
        "vipune.lane_source",
        "registry.lanes",
        "core.process",
        "vipune.settings",
        "core.lane_arms",
        "stages.search.kept_stores",
    },
    # the contract checks and the embedding parity (the embed recipe), not the vipune-lane itself
    "preflight": SHARD
    | EMBED
    | BUILD_RECORDS
    | {
        "stages.search.preflight",
        "vipune.client",
        "vipune.binary",
        "core.process",
        "vipune.import_format",
        "vipune.contract",
        "vipune.settings",
    },
    # the intervals of the metrics (the metrics file's shape); never the report's comparisons or their wording
    "score": FAILED
    | {
        "stages.score",
        "core.run_metrics",
        "core.ranking_settings",
        "registry.measures",
        "core.intervals",
        "core.longmemeval",
        "core.trec",
    },
    # the report reads every stage's outputs (the embed tally's format included), says whether the
    # model's files are the pinned ones (the pins; the model pin is the contract's); a failed pair's
    # exit code and message are its fields (core.failed_pair)
    "report": SECTIONS
    | EXPLAIN
    | {
        "stages.report.report",
        "stages.report.markdown",
        "stages.report.published",
        "stages.report.diagnostics",
        "stages.report.whatif",
        "stages.embed.projection",
        "stages.report.summary",
        "stages.report.document",
        "stages.report.compare",
        "stages.embed.tally",
        "registry.measures",
        "registry.models",
        "registry.views",
        "registry.granularities",
        "core.paths",
        "core.intervals",
        "core.trec",
        "core.report_inputs",
        "registry.lanes",
        "vipune.contract",
        "vipune.release",
    },
    "plots": BUILD_RECORDS
    | {
        "stages.report.plots",
        "stages.report.report_json",
        "core.fingerprints",
        "core.filter_summary",
        "core.embed_throughput",
        "core.run_metrics",
        "core.model_provenance",
        "core.failed_pair",
        "core.report_inputs",
        "core.ranking_settings",
        "registry.measures",
        "registry.views",
        "registry.granularities",
        "core.paths",
    },
    # the report's document in HTML, each plot beside its section: rendering only, nothing read
    # but report.json and the plots
    "report-page": SECTIONS
    | {
        "stages.report.report_page",
        "stages.report.document",
        "stages.report.plots",
        "registry.measures",
        "registry.views",
        "registry.granularities",
        "core.paths",
        "core.intervals",
        "registry.lanes",
    },
    # a question explained from a finished run's files (no rule runs it: a person does), in the report's words
    "explain": SECTIONS | EXPLAIN | {"registry.views", "registry.granularities", "core.intervals"},
    # Snakemake's HTML report of a finished run (no rule runs it: the workflow's onsuccess does)
    "report-html": {"stages.report.report_html", "core.paths"},
    # the verdict on a finished comparison (no rule runs it): report.json and the two builds' metrics,
    # the report's paired statistics, and the report's own words for what else changes the reading
    "gate": SECTIONS
    | {
        "stages.report.gate",
        "stages.report.compare",
        "stages.report.document",
        "registry.measures",
        "registry.views",
        "registry.granularities",
        "registry.lanes",
        "core.paths",
        "core.intervals",
    },
    # the docs generated from the registries and the modules (a developer's command, no rule runs it);
    # the dataset presets' corpus has the manifest's shape (core.report_inputs)
    "generated-docs": {
        "generated_docs",
        "registry.datasets",
        "core.report_inputs",
        "core.paths",
        "registry.granularities",
        "registry.lanes",
        "registry.measures",
        "registry.retrievers",
        "registry.shared_arms",
        "registry.views",
        "core.ranking_settings",
        "vipune.contract",
    },
}
EARLY = (
    "download-dataset",
    "download-model",
    "vipune-home",
    "filter-pairs",
    "filter-rows",
    "embed",
    "search-arms",
    "fuse-reference",
    "search-family",
    "search-plugin",
    "search-vipune",
    "search-vipune-lib",
    "preflight",
    "score",
)


def modules(command: str) -> set[str]:
    return {m for m in command_modules(command) if not m.endswith(".__init__")}


def test_every_command_has_a_budget():
    assert set(BUDGET) == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(BUDGET))
def test_a_command_reaches_only_the_modules_its_work_needs(command):
    stray = modules(command) - ENTRY - BUDGET[command]
    assert not stray, f"`vipune-eval {command}` reaches {sorted(stray)}: an edit there would rerun its jobs"


@pytest.mark.parametrize("command", EARLY)
def test_no_stage_before_the_report_reaches_report_code(command):
    assert not {m for m in modules(command) if m.startswith("stages.report.")}


@pytest.mark.parametrize("command", ("download-dataset", "download-model", "vipune-home"))
def test_the_downloads_do_not_reach_the_vipune_client(command):
    assert "vipune.client" not in modules(command)


def test_only_the_vipune_commands_reach_the_client():
    assert {c for c in COMMANDS if "vipune.client" in modules(c)} == {"vipune-binary", "search-vipune", "preflight"}


def test_the_pairs_and_the_rows_do_not_reach_each_other():
    assert not {"stages.filter.rows", "stages.filter.chunking"} & modules("filter-pairs")
    assert not {"stages.filter.pairs", "stages.filter.split"} & modules("filter-rows")


def test_core_is_the_ground_floor():
    """core/ is shared by every stage: it imports nothing from registry/, plan/ or stages/, so an
    edit there cannot reach core's users through it (issue 36)."""
    above = {
        m: sorted(i for i in imports if i.split(".")[0] in ("registry", "plan", "stages"))
        for m, imports in import_graph().items()
        if m.startswith("core.")
    }
    assert not {m: i for m, i in above.items() if i}


def test_the_registry_imports_no_stage_and_no_plan():
    """The registry is read by the stages and the plan, never the other way round: a plugin is
    imported by the config check (plan), not through a name the import graph cannot see."""
    graph = import_graph()
    for module, imports in graph.items():
        if module.startswith("registry."):
            assert not {i for i in imports if i.split(".")[0] in ("stages", "plan")}, module
    sources = "".join(p.read_text() for p in PACKAGE.rglob("*.py"))
    assert 'import_module("vipune_eval' not in sources and "import_module('vipune_eval" not in sources


@pytest.mark.parametrize("command", ("search-arms", "filter-pairs", "filter-rows", "embed"))
def test_the_retrievers_registry_reruns_no_arms_and_nothing_upstream(command):
    """Editing a preset's description or the report's roles reran every arms shard (issue 36)."""
    assert "registry.retrievers" not in modules(command)


@pytest.mark.parametrize("command", EARLY)
def test_the_report_only_words_rerun_no_stage_before_the_report(command):
    """A granularity's rows in the report's words (registry.views.ROWS) and the comparison
    sentences (stages.report.compare) once reran everything, and every score job (issue 36)."""
    assert not {"registry.views", "stages.report.compare"} & modules(command)
    assert "rows" not in {f.name for f in dataclasses.fields(granularities.Granularity)}


def test_the_contract_constants_import_nothing():
    assert import_graph()["vipune.contract"] == frozenset()


def test_every_module_is_run_by_a_command_or_is_parse_time_only():
    """A module no command reaches is parse-time planning (plan/, the dataset presets) or dead."""
    reached = set().union(*(modules(c) for c in COMMANDS))
    every = {m for m in import_graph() if not m.endswith("__init__")}
    unreached = {m for m in every - reached if not m.startswith("plan.")}
    assert unreached == {"registry.datasets", "registry.models", "core.fingerprints"} - reached, unreached


def test_code_version_follows_a_new_import(tmp_path):
    """A module that starts importing another is tracked without anyone updating a list."""
    package = tmp_path / "vipune_eval"
    shutil.copytree(PACKAGE, package)
    assert "core.intervals" not in command_modules("plots", package)
    before = code_version("plots", package)
    intervals = package / "core" / "intervals.py"
    intervals.write_text(intervals.read_text() + "\n# changed\n")
    assert code_version("plots", package) == before
    plots = package / "stages" / "report" / "plots.py"
    plots.write_text(
        plots.read_text() + "\n\ndef _later():\n    from ...core.intervals import MIN_BOOTSTRAP_PAIRS  # noqa: F401\n"
    )
    import_graph.cache_clear()
    assert "core.intervals" in command_modules("plots", package)
    assert code_version("plots", package) != before


def parsed_imports(source: str, path: Path | None = None) -> list[ast.stmt]:
    """What a full parse finds: every import statement anywhere in the module."""
    return [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import | ast.ImportFrom)]


def every_import(source: str) -> list[str]:
    return sorted(ast.dump(n, include_attributes=False) for n in parsed_imports(source))


def test_the_line_scan_gives_the_graph_a_full_parse_gives(monkeypatch):
    """The import graph reads import lines alone (fast): over the whole package it is the graph a
    full parse of every module gives, and every import statement of a module is among the lines
    it read (more may be: code held in a string, whose imports are no package module)."""
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        scanned = {ast.dump(n, include_attributes=False) for n in _import_statements(source, path)}
        assert set(every_import(source)) <= scanned, path
    import_graph.cache_clear()
    fast = import_graph()
    import_graph.cache_clear()
    monkeypatch.setattr(
        codeversion,
        "_import_statements",
        parsed_imports,
    )
    try:
        assert import_graph() == fast
    finally:
        import_graph.cache_clear()


@pytest.mark.parametrize(
    "source",
    [
        "def f():\n    if x:\n        from .a import (\n            b,  # b's reason\n            c,\n        )\n",
        "from .a import (\n    b,  # one (of two)\n    c,\n)\nimport vipune_eval.d as e\n",
        "try:\n    import vipune_eval.x\nexcept ImportError:\n    from vipune_eval import y\n",
    ],
    ids=["nested", "paren-in-comment", "try"],
)
def test_the_line_scan_misses_no_import_and_falls_back_where_a_line_does_not_parse_alone(source, tmp_path):
    found = sorted(ast.dump(n, include_attributes=False) for n in _import_statements(source, tmp_path / "m.py"))
    assert found == every_import(source)


def test_prose_that_looks_like_an_import_adds_at_most_a_module_too_many():
    source = '"""Docs.\n\nimport order, then a sort\nfrom vipune_eval.core import paths\n"""\nimport json\n'
    found = [ast.dump(n, include_attributes=False) for n in _import_statements(source, PACKAGE / "m.py")]
    assert set(every_import(source)) <= set(found)  # json, and the docstring's line: one too many, none too few


def test_a_package_init_counts_for_every_module_below_it(tmp_path):
    package = tmp_path / "vipune_eval"
    shutil.copytree(PACKAGE, package)
    before = {c: code_version(c, package) for c in ("embed", "score")}
    init = package / "stages" / "embed" / "__init__.py"
    init.write_text(init.read_text() + "\n# changed\n")
    import_graph.cache_clear()
    assert code_version("embed", package) != before["embed"]
    assert code_version("score", package) == before["score"]


# ---------------------------------------------------------------- the plan Snakemake makes


def test_the_edits_table_agrees_with_the_budgets():
    assert {"score", "report", "search_vipune_lib"} <= tracked_rules() and "planned_file" not in tracked_rules()
    for module in EDITS:
        reaching = {RULE[c] for c in COMMANDS if module in command_modules(c)} & tracked_rules()
        assert reaching == reruns(module), module
