"""The tests mirror the package (CONTRIBUTING.md, "Where a test goes"): tests/unit/<path>/test_<module>.py
tests vipune_eval/<path>/<module>.py, the Snakemake runs live in tests/workflow/, helpers in
tests/support/ only, and no test module imports another."""

import ast

from support.scenarios import REPO

TESTS = REPO / "tests"
TEST_FILES = sorted(TESTS.rglob("test_*.py"))


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
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{path.relative_to(REPO)} imports {n}" for n in names
                      if n.split(".")[0].startswith("test_") or n.split(".")[0] == "conftest"]
    assert not found, "; ".join(found)


def test_test_file_names_are_unique():
    """pytest imports each test file by its base name (rootdir-relative, no packages)."""
    names = [p.name for p in TEST_FILES]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


def test_helpers_live_in_support_only():
    """Every Python file under tests/ is a test file, a conftest or support (the fakes included)."""
    others = [p.relative_to(REPO) for p in TESTS.rglob("*.py")
              if not p.name.startswith("test_") and p.name != "conftest.py" and p.parent != TESTS / "support"]
    assert not others, others


def test_the_longest_files_named_for_xdist_exist():
    tree = ast.parse((TESTS / "conftest.py").read_text())
    (names,) = [ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                and any(getattr(t, "id", None) == "LONGEST_FIRST" for t in node.targets)]
    missing = [name for name in names if not (TESTS / name).is_file()]
    assert not missing, f"tests/conftest.py LONGEST_FIRST names files that are not there: {missing}"
