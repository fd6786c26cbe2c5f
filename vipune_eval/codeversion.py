"""Code versions of the rules: a hash of the package modules a command reaches.

Snakemake tracks a rule's shell line but not the Python it runs. Each rule carries, as a param,
the hash of the modules its ``vipune-eval <command>`` can execute: the command's module and
everything it imports, found from the package's own import graph (imports inside functions
included), plus the CLI entry. Editing a module reruns exactly the rules whose commands reach it,
and a new import is followed without anyone updating a list.
"""

from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from pathlib import Path

PACKAGE = "vipune_eval"
PACKAGE_DIR = Path(__file__).resolve().parent
ENTRY = ("__init__", "__main__", "cli")  # what every `vipune-eval <command>` runs first


def _imports(path: Path, modules: set[str]) -> set[str]:
    """Package modules ``path`` imports, at module level or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 or node.module == PACKAGE or (node.module or "").startswith(PACKAGE + "."):
                base = (node.module or "") if node.level == 1 else (node.module or "").removeprefix(PACKAGE).lstrip(".")
                if base:
                    found.add(base.split(".")[0])
                else:  # from . import a, b
                    found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    found.add(alias.name.split(".")[1])
    return found & modules


@lru_cache(maxsize=None)
def import_graph(package_dir: Path = PACKAGE_DIR) -> dict[str, frozenset[str]]:
    modules = {p.stem for p in package_dir.glob("*.py")}
    return {m: frozenset(_imports(package_dir / f"{m}.py", modules)) for m in sorted(modules)}


def reached(start: str, package_dir: Path = PACKAGE_DIR) -> set[str]:
    graph = import_graph(package_dir)
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    return seen


def command_modules(command: str, package_dir: Path = PACKAGE_DIR) -> set[str]:
    """Every package module ``vipune-eval <command>`` can run."""
    from .cli import COMMANDS

    module = COMMANDS[command].target.split(":")[0]
    out: set[str] = set()
    for start in (*ENTRY, module):
        if (package_dir / f"{start}.py").exists():
            out |= reached(start, package_dir)
    # the entry reaches cli, which names every stage lazily (strings), so no stage leaks in
    return out


def code_version(command: str, package_dir: Path = PACKAGE_DIR) -> str:
    digest = hashlib.sha256()
    for module in sorted(command_modules(command, package_dir)):
        digest.update(module.encode() + b"\0" + (package_dir / f"{module}.py").read_bytes())
    return digest.hexdigest()[:16]
