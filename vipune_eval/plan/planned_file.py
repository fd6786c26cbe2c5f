"""The files the plan writes: the fingerprints of a local dataset and model, of every vipune build
and its vipune-lane, and the report's manifest.

Parsing the Snakefile computes their text and writes nothing: a dry run, ``--lint``, ``--dag``,
``--summary``, ``--list-*`` and ``--report`` parse it too. Each file is the output of the local
rule ``planned_file``, whose input is the mark of its text (``mark``) and whose tracked param is the
text's sha256: Snakemake plans the file, and what reads it, exactly when its text changed, in a dry
run as in a real run. Only a real run writes it: its ``onstart`` stages every text under
results/tmp/plan/ (``stage``), and the job moves its own into place (``vipune-eval planned-file``);
a shell line could not carry the text itself (a manifest of many shards is megabytes).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from vipune_eval.core import paths
from vipune_eval.core.io import dump_json, write_text
from vipune_eval.errors import EvalError


def texts(files: dict[str, Any]) -> dict[str, str]:
    """Path → the JSON text the file must hold."""
    return {path: dump_json(content, path) for path, content in files.items()}


def digest(text: str) -> str:
    """The planned_file rule's tracked param: the sha256 of the text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def mark(path: str, text: str) -> list[str]:
    """The planned file's input: the mark of its text, an empty file named by its sha256 (rule
    planned_text), so that a new text is a missing file, seen whatever the rerun triggers and
    whether or not Snakemake kept a record of the file. None for a file that holds the text
    already and has no mark: written before marks were, it reruns nothing."""
    marked = paths.fill(paths.PLAN_MARK, sha256=digest(text))
    held = Path(path).is_file() and Path(path).read_text(encoding="utf-8") == text
    return [marked] if Path(marked).exists() or not held else []


def staged(sha256: str) -> Path:
    return Path(paths.PLAN_STAGE) / f"{sha256}.json"


def stage(planned: dict[str, str]) -> None:
    """Every planned text under results/tmp/plan/, named by its sha256 (a real run's onstart)."""
    for text in planned.values():
        write_text(staged(digest(text)), text)


def unstage() -> None:
    """The staged texts, gone once a run succeeded (a failed run's are cleared when the next starts)."""
    shutil.rmtree(paths.PLAN_STAGE, ignore_errors=True)


def refuse_unseen(planned: dict[str, str], params_tracked: bool) -> None:
    """When the DAG is planned (a dry run's too): rerun triggers that leave out ``params`` cannot
    see a planned file's new text (a dataset's or a model's new bytes, the report's new inputs), so
    such a run would keep the old results: it is refused, naming the files."""
    stale = [
        path
        for path, text in planned.items()
        if Path(path).is_file() and Path(path).read_text(encoding="utf-8") != text
    ]
    if stale and not params_tracked:
        raise EvalError(
            f"{', '.join(stale)} changed (the dataset's or the model's bytes, or the report's "
            "inputs), and rerun triggers without `params` cannot see it: this run would keep "
            "results of the old ones",
            fix="run once without --rerun-triggers (its default includes params): it reruns what the change made stale",
        )


def run_planned_file(sha256: str, out: Path) -> None:
    """``vipune-eval planned-file``: put the staged text with this sha256 in place at ``out``."""
    source = staged(sha256)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EvalError(
            f"{source} is not there: the run stages the planned files when it starts (its "
            "onstart), and this run did not",
            fix="run without --no-hooks (Snakemake's own sub-processes pass it; a run does not need it)",
        ) from None
    if digest(text) != sha256:
        raise EvalError(
            f"{source} does not hold the text its name promises",
            fix="run again: the run stages every planned file afresh when it starts",
        )
    write_text(out, text)
