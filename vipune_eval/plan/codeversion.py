"""Code versions of the rules: a hash of the package modules a command reaches.

Snakemake tracks a rule's shell line but not the Python it runs. Each rule carries, as a param,
the hash of the modules its ``vipune-eval <command>`` can execute: the command's module and
everything it imports, found from the package's own import graph (imports inside functions
included), plus the CLI entry. Editing a module reruns exactly the rules whose commands reach it,
and a new import is followed without anyone updating a list.

Modules are named by their dotted path inside the package (``stages.embed.store``); a package's
``__init__.py`` is ``<package>.__init__`` (the top one ``__init__``), and importing a module runs
the ``__init__`` of every package above it, so those count as reached too.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

PACKAGE = "vipune_eval"
PACKAGE_DIR = Path(__file__).resolve().parents[1]
ENTRY = ("__init__", "__main__", "cli")  # what every `vipune-eval <command>` runs first


def module_name(path: Path, package_dir: Path) -> str:
    return ".".join(path.relative_to(package_dir).with_suffix("").parts)


def module_file(module: str, package_dir: Path) -> Path:
    return package_dir.joinpath(*module.split(".")).with_suffix(".py")


def _package_of(module: str) -> str:
    """The dotted package a module sits in ("" for the top package)."""
    parts = module.split(".")
    return ".".join(parts[:-1])


def _target(name: str, modules: set[str]) -> str | None:
    """The module that importing dotted ``name`` runs last: the module itself or a package's
    ``__init__`` ("" is the top package)."""
    if name in modules:
        return name
    init = f"{name}.__init__" if name else "__init__"
    return init if init in modules else None


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of ``body`` and of the blocks nested in it (functions, classes, if, try,
    with, loops, match): where an import can stand. Skipping the expressions, which ast.walk
    visits too, makes each Snakemake start ~0.05 s faster."""
    for node in body:
        yield node
        for block in ("body", "orelse", "finalbody", "handlers", "cases"):
            nested = getattr(node, block, None)
            if isinstance(nested, list):
                yield from _statements(nested)


# An import statement at the start of a line (any indent), a parenthesised one with its lines.
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import[ \t]*(?:\([^)]*\)|[^\n]*)|import[ \t][^\n]*)", re.M)


def _import_statements(source: str, path: Path) -> list[ast.stmt]:
    """The import statements of ``source``, parsed one by one from the lines that start one:
    parsing the whole module cost every Snakemake start ~0.1 s. A line that only looks like an
    import (prose in a docstring) parses to nothing or to an import that adds a module too many,
    never one too few; where a statement does not parse alone (a ``)`` in a comment inside its
    parentheses), the whole module is parsed instead."""
    found: list[ast.stmt] = []
    for match in _IMPORT_LINE.finditer(source):
        try:
            found.extend(ast.parse(match.group(0).strip()).body)
        except SyntaxError:
            return list(_statements(ast.parse(source, str(path)).body))
    return found


def _imports(path: Path, module: str, modules: set[str]) -> set[str]:
    """Package modules ``module`` imports, at module level or inside functions."""
    found: set[str] = set()

    def add(name: str) -> None:
        target = _target(name, modules)
        if target is not None:
            found.add(target)

    for node in _import_statements(path.read_text(encoding="utf-8"), path):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package_of(module).split(".") if _package_of(module) else []
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                base_name = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module and (node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
                base_name = node.module.removeprefix(PACKAGE).lstrip(".")
            else:
                continue
            add(base_name)
            for alias in node.names:  # from package import module
                add(f"{base_name}.{alias.name}" if base_name else alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    add(alias.name.removeprefix(PACKAGE + "."))
    # a package's own __init__ found through ``from package import name`` is not itself a module
    # import of interest when name is a submodule; keeping it is harmless (an __init__ is tiny)
    return found - {module}


@cache
def import_graph(package_dir: Path = PACKAGE_DIR) -> dict[str, frozenset[str]]:
    modules = {module_name(p, package_dir) for p in package_dir.rglob("*.py")}
    return {m: frozenset(_imports(module_file(m, package_dir), m, modules)) for m in sorted(modules)}


def _parents(module: str) -> list[str]:
    """The ``__init__`` of every package above ``module`` (run when it is imported)."""
    parts = module.split(".")[:-1]
    return ["__init__", *(".".join(parts[:i]) + ".__init__" for i in range(1, len(parts) + 1))]


def reached(start: str, package_dir: Path = PACKAGE_DIR) -> set[str]:
    graph = import_graph(package_dir)
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
            todo.extend(p for p in _parents(module) if p in graph and p != module)
    return seen


def command_modules(command: str, package_dir: Path = PACKAGE_DIR) -> set[str]:
    """Every package module ``vipune-eval <command>`` can run."""
    from vipune_eval.cli import COMMANDS

    module = COMMANDS[command].target.split(":")[0]
    out: set[str] = set()
    for start in (*ENTRY, module):
        if module_file(start, package_dir).exists():
            out |= reached(start, package_dir)
    # the entry reaches cli, which names every stage lazily (strings), so no stage leaks in
    return out


def code_version(command: str, package_dir: Path = PACKAGE_DIR) -> str:
    digest = hashlib.sha256()
    for module in sorted(command_modules(command, package_dir)):
        digest.update(module.encode() + b"\0" + module_file(module, package_dir).read_bytes())
    return digest.hexdigest()[:16]
