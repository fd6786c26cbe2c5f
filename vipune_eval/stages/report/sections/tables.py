"""The tables of retrievers every section draws: a retriever's row (its pairs, how many failed,
each measure with its interval), a measure per category, vipune's lanes marked (the HTML shows
them stronger), and the note under a table that shows ``no CI``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vipune_eval.core.run_metrics import mean
from vipune_eval.registry import lanes
from vipune_eval.stages.report.document import NO_INTERVAL_NOTE, Block, Paragraph, Table, cell
from vipune_eval.stages.report.report_json import RetrieverEntry


def marked(names: list[str]) -> frozenset[int]:
    """The rows of vipune's lanes among ``names``."""
    return frozenset(i for i, name in enumerate(names) if name in lanes.RUNS)


def noted(table: Table) -> list[Block]:
    """A table and, when a cell shows ``no CI``, the note that explains it."""
    return [table, Paragraph(NO_INTERVAL_NOTE)] if table.shows_no_interval() else [table]


def opt(value: float | None) -> str:
    """A value, or ``–`` where there is none."""
    return "–" if value is None else f"{value:.3f}"


def retriever_table(
    rows: Mapping[str, Mapping[str, Any]], keys: list[str], failed: Mapping[str, int] | None = None
) -> Table:
    """One row per retriever: its pairs (and how many failed: ``failed``, else its entry's) and each
    measure with its interval."""
    out = []
    for name, entry in rows.items():
        count = failed[name] if failed is not None else len(entry.get("failed") or {})
        out.append(
            [
                name,
                f"{entry['pairs']}{f' ({count} failed)' if count else ''}",
                *(cell(entry["metrics"][key], entry["intervals"][key]) for key in keys),
            ]
        )
    return Table(["retriever", "pairs", *keys], out, marked=marked(list(rows)))


def per_category_table(retrievers: Mapping[str, RetrieverEntry], key: str) -> list[Block]:
    """``key`` per category, each category's pair count in its heading (and in a cell whose
    retriever scored fewer pairs there: failed pairs are left out)."""
    categories = sorted({c for e in retrievers.values() for c in e["per_category"]})
    pairs = {
        c: max(e["per_category"][c]["pairs"] for e in retrievers.values() if c in e["per_category"]) for c in categories
    }
    rows = []
    for name, entry in retrievers.items():
        cells = []
        for c in categories:
            group = entry["per_category"].get(c)
            if group is None:
                cells.append("–")
                continue
            fewer = f" ({group['pairs']} pairs)" if group["pairs"] != pairs[c] else ""
            cells.append(cell(mean(group, key), group["intervals"][key]) + fewer)
        rows.append([name, *cells])
    return noted(
        Table(["retriever", *(f"{c} ({pairs[c]} pairs)" for c in categories)], rows, marked=marked(list(retrievers)))
    )
