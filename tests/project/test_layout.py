"""The tests mirror the package (CONTRIBUTING.md, "Where a test goes"): tests/unit/<path>/test_<module>.py
tests vipune_eval/<path>/<module>.py, every module has that file or a stated reason below, the
Snakemake runs live in tests/workflow/, helpers in tests/support/ only, and no test module
imports another."""

import ast
from pathlib import Path

from support.scenarios import REPO
from vipune_eval.plan.codeversion import PACKAGE_DIR, import_graph, module_name, reached

TESTS = REPO / "tests"
TEST_FILES = sorted(TESTS.rglob("test_*.py"))

# Modules without tests/unit/<path>/test_<module>.py, each with (the test file that covers it, or
# "", and why). A covering file must reach the module through its imports, or name it. A package
# __init__.py that holds only its docstring needs no entry. A stale entry fails below.
WITHOUT_OWN_FILE = {
    "__init__": ("tests/unit/stages/search/test_plugin.py", "vipune_eval.Haystack, its one attribute, is the plugin's"),
    "__main__": ("", "`python -m vipune_eval`: two lines that call cli.main (tests/unit/test_cli.py)"),
    "core.longmemeval": (
        "tests/unit/stages/test_score.py",
        "LongMemEval's own measures, beside the scoring that calls them",
    ),
    "plan.config_args": (
        "tests/workflow/test_config_args.py",
        "it corrects Snakemake's own reading of --config, so it is tested through Snakemake",
    ),
    "registry.shared_arms": ("tests/unit/stages/search/test_arms.py", "names only; the arms are computed there"),
    "stages.embed.provider": (
        "tests/unit/stages/embed/test_store.py",
        "the provider a job resolves, beside the store it writes",
    ),
    "stages.filter.official": (
        "tests/unit/stages/filter/test_pairs.py",
        "the official view's rows, read from one generated file with the pairs",
    ),
    "stages.filter.reader": (
        "tests/unit/stages/filter/test_pairs.py",
        "both filter commands read the dataset through it there, bad input included",
    ),
    "stages.filter.rows": (
        "tests/unit/stages/filter/test_pairs.py",
        "filter-rows, run on the same generated file as filter-pairs",
    ),
    "vipune.contract": (
        "tests/unit/stages/search/test_preflight.py",
        "constants, each checked against the binary by the preflight",
    ),
    "vipune.release": ("tests/project/test_facts.py", "one constant, held to the docs and build.sh there"),
    "stages.embed.projection": (
        "tests/unit/stages/embed/test_tally.py",
        "the embed throughput projected from the tallies, beside the tally",
    ),
}


def own_test_file(module: str) -> Path:
    parts = module.split(".")
    return TESTS / "unit" / Path(*parts[:-1], f"test_{parts[-1]}.py")


def modules_needing_a_test_file() -> list[str]:
    """Every module of the package but a package's __init__.py that holds only its docstring."""
    out = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        if path.name == "__init__.py" and len(body) <= 1 and all(isinstance(n, ast.Expr) for n in body):
            continue
        out.append(module_name(path, PACKAGE_DIR))
    return out


def package_modules_imported_by(path: Path) -> set[str]:
    modules = set(import_graph())
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)]
            if isinstance(node, ast.ImportFrom) and not node.level
            else []
        )
        for name in names:
            if name == "vipune_eval":
                found.add("__init__")
            elif name.startswith("vipune_eval."):
                inner = name.removeprefix("vipune_eval.")
                found |= {m for m in (inner, f"{inner}.__init__") if m in modules}
    return found


def covers(test_file: Path, module: str) -> bool:
    """Whether ``test_file`` reaches ``module`` through its imports, or names it."""
    if any(module in reached(m) for m in package_modules_imported_by(test_file)):
        return True
    return f"vipune_eval.{module}" in test_file.read_text(encoding="utf-8")


def test_every_unit_test_file_names_the_module_it_tests():
    stray = []
    for path in sorted((TESTS / "unit").rglob("test_*.py")):
        relative = path.relative_to(TESTS / "unit")
        package = REPO / "vipune_eval" / relative.parent
        name = path.stem.removeprefix("test_")
        if not ((package / f"{name}.py").is_file() or (package / name / "__init__.py").is_file()):
            stray.append(f"{path.relative_to(REPO)}: no vipune_eval/{relative.parent / name}.py")
    assert not stray, "; ".join(stray)


def test_no_test_module_imports_another():
    """A helper two test files need belongs in tests/support/ (an import of a test module runs its
    module-level code a second time and ties the two files to one folder)."""
    found = []
    for path in TEST_FILES + [TESTS / "conftest.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            found += [
                f"{path.relative_to(REPO)} imports {n}"
                for n in names
                if n.split(".")[0].startswith("test_") or n.split(".")[0] == "conftest"
            ]
    assert not found, "; ".join(found)


def test_test_file_names_are_unique():
    """pytest imports each test file by its base name (rootdir-relative, no packages)."""
    names = [p.name for p in TEST_FILES]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


def test_helpers_live_in_support_only():
    """Every Python file under tests/ is a test file, a conftest or support (the fakes included)."""
    others = [
        p.relative_to(REPO)
        for p in TESTS.rglob("*.py")
        if not p.name.startswith("test_") and p.name != "conftest.py" and p.parent != TESTS / "support"
    ]
    assert not others, others


def test_the_longest_files_named_for_xdist_exist():
    tree = ast.parse((TESTS / "conftest.py").read_text())
    (names,) = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "LONGEST_FIRST" for t in node.targets)
    ]
    missing = [name for name in names if not (TESTS / name).is_file()]
    assert not missing, f"tests/conftest.py LONGEST_FIRST names files that are not there: {missing}"


def test_every_module_has_its_unit_test_file_or_a_stated_reason():
    missing = [
        f"vipune_eval/{m.replace('.', '/')}.py: no {own_test_file(m).relative_to(REPO)}"
        for m in modules_needing_a_test_file()
        if not own_test_file(m).is_file() and m not in WITHOUT_OWN_FILE
    ]
    assert not missing, (
        "write the module's unit test file, or give the reason in tests/project/test_layout.py "
        f"WITHOUT_OWN_FILE: {'; '.join(missing)}"
    )


def test_every_stated_reason_still_holds():
    modules = set(modules_needing_a_test_file())
    wrong = []
    for module, (where, why) in WITHOUT_OWN_FILE.items():
        if module not in modules:
            wrong.append(f"{module}: no such module now")
        elif own_test_file(module).is_file():
            wrong.append(f"{module}: has {own_test_file(module).relative_to(REPO)} now")
        elif not why:
            wrong.append(f"{module}: no reason given")
        elif where and not ((REPO / where).is_file() and covers(REPO / where, module)):
            wrong.append(f"{module}: {where} does not reach it")
    assert not wrong, "tests/project/test_layout.py WITHOUT_OWN_FILE: remove or correct " + "; ".join(wrong)


def test_the_coverage_check_follows_imports():
    assert covers(TESTS / "unit" / "stages" / "filter" / "test_pairs.py", "stages.filter.reader")
    assert not covers(TESTS / "unit" / "core" / "test_trec.py", "stages.filter.reader")
    assert "core.__init__" not in modules_needing_a_test_file() and "cli" in modules_needing_a_test_file()
