"""One meaning per name (issues 42 and 55): a command's module is named for the command, and its
rule likewise (CONTRIBUTING.md, "Where a test goes" and the package map); no two package modules
share a file name, no two classes a name; the names retired for saying two things stay out.

A command is the path of its module below the package, '_' written '-', or that path's tail:
``search-arms`` is ``stages/search/arms.py``, ``preflight`` ``stages/search/preflight.py``,
``vipune-home`` ``vipune/home.py``. A module that serves two commands names each by its
function: ``download-dataset`` is ``stages/download.py``'s ``download_dataset``. The rule that
runs ``vipune-eval <command>`` is the command with '_' (``search_arms``)."""

import ast
import re
from collections import defaultdict

from support.scenarios import REPO
from vipune_eval.cli import COMMANDS

# Commands whose module is named otherwise, each with its reason. A stale entry (the command gone,
# or its module named for it now) fails below.
NOT_YET: dict[str, str] = {}


def named_for(command: str, target: str) -> bool:
    """Whether ``target`` ("module:function") is named for ``command``."""
    module, function = target.split(":")
    path = module.replace("_", "-").split(".")
    tails = {"-".join(path[i:]) for i in range(len(path))}
    return command in tails or (function.replace("_", "-") == command and command.startswith(path[-1] + "-"))


def test_every_commands_module_is_named_for_it():
    wrong = [
        f"{name}: {command.target.split(':')[0].replace('.', '/')}.py"
        for name, command in COMMANDS.items()
        if name not in NOT_YET and not named_for(name, command.target)
    ]
    assert not wrong, (
        "a command's module is named for it (search-arms: stages/search/arms.py); rename the "
        f"module or the command and its rule: {'; '.join(wrong)}"
    )


def test_the_exceptions_are_still_needed():
    stale = [name for name in NOT_YET if name not in COMMANDS or named_for(name, COMMANDS[name].target)]
    assert not stale, f"tests/project/test_names.py NOT_YET: remove {stale} (their modules are named for them now)"


def test_the_name_check_sees_a_module_named_otherwise():
    assert named_for("search-arms", "stages.search.arms:run_arms")
    assert named_for("preflight", "stages.search.preflight:run_preflight")
    assert named_for("search-vipune-lib", "stages.search.vipune_lib:run_vipune_lib")
    assert named_for("download-model", "stages.download:download_model")
    assert not named_for("search-vipune", "stages.search.vipune_lane:run_vipune")
    assert not named_for("download-model", "stages.download:fetch_model")
    assert not named_for("report-page", "stages.report.html:run_page")


def rules_and_commands() -> dict[str, set[str]]:
    """Every rule of workflow/rules/ → the vipune-eval commands its body runs."""
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        text = path.read_text(encoding="utf-8")
        starts = list(re.finditer(r"^\s*rule (\w+):", text, re.M))
        for start, end in zip(starts, [*starts[1:], None]):
            body = text[start.end() : end.start() if end else len(text)]
            found[start.group(1)] = set(re.findall(r"\bvipune-eval ([a-z][a-z-]*)", body))
    return found


def test_a_rule_that_runs_a_command_is_named_for_it():
    found = rules_and_commands()
    assert {"search_arms", "score", "vipune_binary"} <= set(found)  # the parse sees the rules
    wrong = [
        f"rule {rule} runs vipune-eval {', '.join(sorted(commands))}"
        for rule, commands in found.items()
        if commands and commands != {rule.replace("_", "-")}
    ]
    assert not wrong, "; ".join(wrong) + " (a rule is its command with '_': search-arms runs in rule search_arms)"
    unknown = sorted({c for commands in found.values() for c in commands} - set(COMMANDS))
    assert not unknown, f"rules run commands the CLI lacks: {unknown}"


# "lane" is one of vipune's two lanes (docs/glossary.md); these phrases each meant two things, and
# "the lane" (or "its lane") a third: the vipune-lane program.
RETIRED = re.compile(r"model-free lane|vipune lanes?\b|reference[- ]lanes?\b|\b(?:the|its) lane\b(?![-/\w])", re.I)
# Files that still hold a retired phrase, each with its reason; a stale entry fails below.
PHRASES_NOT_YET: dict[str, str] = {
    "lane/Cargo.toml": "its bytes name every vipune-lane build (vipune/lane_source.py): reworded with lane/'s next edit",
}


def prose_files() -> list:
    """The docs, the package, the workflow and the configs: what a reader reads as prose."""
    return sorted(
        {
            *REPO.glob("*.md"),
            *(REPO / "docs").glob("*.md"),
            *(REPO / "vipune_eval").rglob("*.py"),
            *(REPO / "workflow").rglob("*.smk"),
            *(REPO / "workflow").rglob("*.yaml"),
            *(REPO / "workflow").rglob("*.rst"),
            *(REPO / "config").glob("*.yaml"),
            REPO / "workflow" / "Snakefile",
            REPO / "lane" / "Cargo.toml",
        }
    )


def retired_phrases(text: str) -> list[str]:
    """The retired phrases in ``text``, also where a line break (and a comment's ``#``) splits one."""
    text = text.split("## Retired phrases")[0]  # the glossary names them to retire them
    return [m.group(0) for m in RETIRED.finditer(re.sub(r"[ \t]*\n[ \t]*(?:#+[ \t]*)?", " ", text))]


def test_no_retired_lane_phrase_in_the_docs_the_package_or_the_workflow():
    found = [
        f"{path.relative_to(REPO)}: {', '.join(sorted(set(phrases)))}"
        for path in prose_files()
        if path.relative_to(REPO).as_posix() not in PHRASES_NOT_YET
        and (phrases := retired_phrases(path.read_text(encoding="utf-8")))
    ]
    assert not found, (
        "retired phrases (docs/glossary.md says what to write instead: the binary lane, the lib "
        f"lane, the reference retrievers): {'; '.join(found)}"
    )


def test_the_phrase_exceptions_are_still_needed():
    stale = [
        name
        for name in PHRASES_NOT_YET
        if not (REPO / name).is_file() or not retired_phrases((REPO / name).read_text(encoding="utf-8"))
    ]
    assert not stale, f"tests/project/test_names.py PHRASES_NOT_YET: remove {stale} (no retired phrase there now)"


def test_the_phrase_check_sees_a_phrase_split_by_a_line_break():
    assert retired_phrases("built beside it: the\n    # lane's search code") == ["the lane"]
    assert retired_phrases("the lanes agree; the vipune-lane; the lane/ crate") == []
    assert retired_phrases("the vipune\n    # lane's shards; the Model-free lane") == ["vipune lane", "Model-free lane"]
    assert retired_phrases("the binary lane, the lib lane, vipune-lane, the reference retrievers") == []
    assert (REPO / "docs" / "glossary.md") in prose_files()


# Names the code once used for two things (issue 55), each with what replaced it.
RETIRED_NAMES = {
    r"\bRuns\b(?=\(|`|\s\||:$)|registry[./]vipune_runs\b|stages[./]report[./]lanes\b": "registry/lanes.py's Lane",
    r"\bLaneRun\b|\bvipune[./]lane\b": "vipune/vipune_lane.py's VipuneLane",
    r"\{\{lane\}\}|\bwildcards\.lane\b|^\s+lane=rf\"|\(\"\{lane\}\"|-\{lane\}\"": "the {lane_build} wildcard",
    r"\bhtml/report\.html": "results/html/report-page.html (results/report.html is Snakemake's report)",
    r"\bregistry[./]arms\b": "registry/shared_arms.py (stages/search/arms.py is the search-arms command)",
    r"\bcore[./]manifest\b": "core/report_inputs.py (plan/manifest.py computes what it types)",
    r"\bsections[./]scored\b": "sections/provenance.py",
    r"\bconfig/s\.yaml\b": "config/longmemeval_s.yaml",
}


def code_and_docs() -> list:
    """What a reader of the code, the tests and the docs reads (this file, which lists the names, aside)."""
    found = {
        *prose_files(),
        *(REPO / "tests").rglob("*.py"),
        *(REPO / "benchmarks").glob("*.py"),
        REPO / "benchmarks" / "README.md",
        *(p for p in (REPO / ".ci").rglob("*") if p.is_file()),
    }
    return sorted(found - {REPO / "tests" / "project" / "test_names.py"})


def retired_names(text: str) -> list[str]:
    text = text.split("## Retired phrases")[0]  # the glossary names them to retire them
    return [
        f"{m.group(0)} (now {instead})"
        for pattern, instead in RETIRED_NAMES.items()
        for m in re.finditer(pattern, text, re.M)
    ]


def test_no_retired_name_in_the_code_the_tests_or_the_docs():
    found = [
        f"{path.relative_to(REPO)}: {'; '.join(sorted(set(names)))}"
        for path in code_and_docs()
        if (names := retired_names(path.read_text(encoding="utf-8", errors="replace")))
    ]
    assert not found, "names retired by issue 55 (docs/glossary.md): " + " | ".join(found)


def test_the_name_check_sees_each_retired_name():
    assert sorted(retired_names("from vipune_eval.vipune.lane import LaneRun")) == [
        "LaneRun (now vipune/vipune_lane.py's VipuneLane)",
        "vipune.lane (now vipune/vipune_lane.py's VipuneLane)",
    ]
    assert retired_names('BINARY = Runs("vipune", "vipune-semantic")')
    assert retired_names('paths.lib_run("{lane}")') and retired_names('"vipune-lib-{lane}"')
    assert not retired_names('echo "${lane}"') and not retired_names('f"{lane} is not there"')
    assert not retired_names(
        "vipune/vipune_lane.py VipuneLane {lane_build} html/report-page.html results/report.html "
        "registry/shared_arms.py core/report_inputs.py sections/provenance.py Runs on the cached"
    )


def test_no_two_package_modules_share_a_file_name_and_no_two_classes_a_name():
    """Issue 55: two arms.py, two manifest.py and two classes Preset each meant two things."""
    modules: dict[str, list[str]] = defaultdict(list)
    classes: dict[str, list[str]] = defaultdict(list)
    package = REPO / "vipune_eval"
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(package).as_posix()
        if path.name != "__init__.py":
            modules[path.name].append(where)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                classes[node.name].append(where)
    shared = {name: where for name, where in {**modules, **classes}.items() if len(where) > 1}
    assert not shared, f"one name, two things: {shared} (rename one of each; docs/glossary.md)"


def test_no_two_section_modules_define_one_public_name():
    """The report's sections are one room: ``warnings`` in three of them meant three lists."""
    defined: dict[str, list[str]] = defaultdict(list)
    for path in sorted((REPO / "vipune_eval" / "stages" / "report" / "sections").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                defined[node.name].append(path.name)
    shared = {name: modules for name, modules in defined.items() if len(modules) > 1}
    assert not shared, f"names defined by two section modules: {shared}"
