"""The newcomer's way in (issue 24): every relative link of the README, CONTRIBUTING.md and docs/
resolves (files, and #anchors to headings); the README stays short, with its commands up front."""

import re
from pathlib import Path

import pytest

from support.scenarios import REPO

PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        if match := re.match(r"#{1,6}\s+(.*)", line):
            base = slug(match.group(1))
            found.add(base if base not in seen else f"{base}-{seen[base]}")
            seen[base] = seen.get(base, 0) + 1
    return found


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    return [m.group(1) for m in LINK.finditer(text)]


def test_the_pages_exist():
    names = {p.relative_to(REPO).as_posix() for p in PAGES}
    assert {
        "README.md",
        "CONTRIBUTING.md",
        "docs/configuration.md",
        "docs/cluster.md",
        "docs/reruns.md",
        "docs/protocols.md",
        "docs/statistics.md",
        "docs/troubleshooting.md",
        "docs/extending.md",
    } <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (file.suffix != ".md" or anchor not in anchors(file)):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


def test_the_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "a.md"
    page.write_text(
        "# Top\n\n## Tune on dev, report test\n\n[x](b.md) [y](#tune-on-dev-report-test) "
        "`[z](code.md)`\n\n```\n[w](fenced.md)\n```\n"
    )
    assert links(page) == ["b.md", "#tune-on-dev-report-test"]
    assert anchors(page) == {"top", "tune-on-dev-report-test"}


def test_the_readme_is_short_and_starts_with_the_commands_ci_runs():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150
    head = "\n".join(lines[:40])
    assert "snakemake --cores" in head
    tests = "pip install -e '.[test]' && pytest"
    assert tests in head
    ci = (REPO / ".ci" / "run").read_text()  # the README's test command is CI's: the install, later pytest
    assert re.search(
        r"^python3 -m venv \.venv && \. \.venv/bin/activate && pip install (-q )?-e '\.\[test\]'$"
        r"(.|\n)*^pytest$",
        ci,
        re.M,
    )


def test_the_generated_docs_are_their_owners():
    """Issue 28: docs/registry.md cannot drift from the registries, nor the package map in
    CONTRIBUTING.md from the modules, nor the presets in docs/extending.md from the registry: the
    developer's command checks them (``vipune-eval generated-docs --check``; issue 55 item 3)."""
    from vipune_eval import cli

    assert cli.main(["generated-docs", "--check"]) == 0, "run: vipune-eval generated-docs"


POINTED = [*PAGES, REPO / "benchmarks" / "README.md", REPO / "config" / "README.md"]
RETIRED = {"benchmarks/run.py"}  # named on purpose as what the suite replaced (its text is in benchmarks/HISTORY.md)
PACKAGE_FOLDERS = ("core", "plan", "registry", "stages", "vipune")  # a path may be named from inside the package


def _repo_file(path: str) -> Path | None:
    """The file a doc's `path` names: from the repository's root, or from the package's
    (`core/paths.py`); None for a path into neither (a run's results/, vipune's own src/)."""
    top = path.split("/")[0]
    if "/" not in path:  # a bare name: a file at the root or a module at the package's top (`cli.py`)
        return next((f for f in (REPO / path, REPO / "vipune_eval" / path) if f.exists()), None)
    if (REPO / top).exists() and top not in ("results",):
        return REPO / path
    if top in PACKAGE_FOLDERS:
        return REPO / "vipune_eval" / path
    return None


def test_every_repository_path_the_docs_name_exists():
    """A doc naming a file of the repository (`tests/support/results.py`, `core/paths.py`,
    `vipune_eval/...`) points at a file that is there (the restructuring of issue 28 moved every
    module; CONTRIBUTING once sent readers to a function in a file that did not hold it)."""
    missing = set()
    for page in POINTED:
        text = page.read_text(encoding="utf-8")
        named = set(re.findall(r"vipune_eval/[\w/]+\.py", text))
        named |= set(re.findall(r"`([\w.][\w./-]*\.(?:py|smk|sh|rs|yaml|toml|rst|md))`", text))
        missing |= {
            f"{page.relative_to(REPO)}: {path}"
            for path in named - RETIRED
            if (file := _repo_file(path)) is not None and not file.exists()
        }
    assert not missing, sorted(missing)


def test_every_name_the_docs_place_in_a_file_is_defined_there():
    """ "`stages/report/plots.py`'s `PLOTS`": the file defines that name (a def, a class, an
    assignment, a Rust fn or const)."""
    wrong = []
    for page in POINTED:
        text = page.read_text(encoding="utf-8")
        for path, name in re.findall(r"`([\w./-]+\.(?:py|smk|rs))`'s `(\w+)", text):
            file = _repo_file(path)
            if file is None or not file.exists():
                if "/" in path:
                    wrong.append(f"{page.relative_to(REPO)}: {path} is not a file of the repository")
                continue
            defined = rf"^\s*(?:def|class|fn|const|rule|struct)\s+{name}\b|^\s*{name}\b\s*(?::[^=\n]*)?="
            if not re.search(defined, file.read_text(encoding="utf-8"), re.M):
                wrong.append(f"{page.relative_to(REPO)}: {path} defines no {name}")
    assert not wrong, wrong


def _module_names_in(text: str) -> set[str]:
    """The package's modules a text names: ``vipune_eval.x.y``, ``vipune_eval/x/y.py``, and the
    package-relative ``core.x``, ``plan.x``, ``registry.x``, ``stages.x.y`` (``vipune.x`` is left
    out: ``vipune.binary`` is a config key as often as a module)."""
    names = {m.replace("/", ".") for m in re.findall(r"vipune_eval/([\w/]+)\.py", text)}
    names |= set(re.findall(r"\bvipune_eval\.((?:[A-Za-z_]\w*\.?)+)", text))
    names |= set(re.findall(r"(?<![\w./-])((?:core|plan|registry|stages)\.(?:[A-Za-z_]\w*\.?)+)", text))
    return {n.rstrip(".") for n in names}


def _resolves(name: str) -> bool:
    """A module of the package, or an attribute of one (``plan.workspace.Workspace.plots``)."""
    import importlib

    parts = name.split(".")
    for n in range(len(parts), -1, -1):
        path = REPO / "vipune_eval" / Path(*parts[:n])
        if n == 0 or path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            if n == len(parts):
                return True
            target = importlib.import_module(".".join(["vipune_eval", *parts[:n]]))
            for attr in parts[n:]:
                if not hasattr(target, attr):
                    return False
                target = getattr(target, attr)
            return True
    return False


def test_every_module_the_code_comments_and_schema_name_exists():
    """Docstrings, comments, help texts, rules and the schema name modules of the package as they
    are now (the restructuring of issue 28 left flat names such as vipune_eval.granularities)."""
    import io
    import tokenize

    def prose(path: Path) -> str:
        """A file's comments and strings (its code names modules by their import aliases)."""
        if path.suffix == ".yaml":
            return path.read_text(encoding="utf-8")
        tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
        return "\n".join(
            t.string for t in tokens if t.type in (tokenize.COMMENT, tokenize.STRING) and t.string[:1] not in "bB"
        )  # bytes are data (Parquet metadata keys)

    sources = [
        *sorted((REPO / "vipune_eval").rglob("*.py")),
        *sorted((REPO / "workflow").rglob("*.smk")),
        REPO / "workflow" / "Snakefile",
        REPO / "workflow" / "schemas" / "config.schema.yaml",
    ]
    stale = sorted(
        f"{path.relative_to(REPO)}: {name}"
        for path in sources
        for name in _module_names_in(prose(path))
        if not name.endswith(".md") and not _resolves(name)
    )
    assert not stale, stale


def test_every_module_the_docs_name_exists():
    """The pages name modules as the package has them now (`stages.report.plots`,
    `vipune_eval.core.paths`); a page (registry.md) and a Parquet metadata key the package writes
    (`vipune_eval.model_fingerprint`) are not modules."""
    import ast

    keys = {
        node.value.decode()
        for path in (REPO / "vipune_eval").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, bytes) and node.value.startswith(b"vipune_eval.")
    }
    stale = sorted(
        f"{page.relative_to(REPO)}: {name}"
        for page in POINTED
        for name in _module_names_in(page.read_text(encoding="utf-8"))
        if not name.endswith(".md") and f"vipune_eval.{name}" not in keys and not _resolves(name)
    )
    assert not stale, stale


def test_the_module_name_check_sees_a_stale_name():
    assert _module_names_in("see vipune_eval.granularities and plan.workspace.plots") == {
        "granularities",
        "plan.workspace.plots",
    }
    assert not _resolves("granularities") and not _resolves("plan.workspace.plots")
    assert _resolves("plan.workspace.Workspace.plots") and _resolves("core.paths")
