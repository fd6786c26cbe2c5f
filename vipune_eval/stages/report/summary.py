"""What a finished run prints last (results/summary.txt): what was scored (the vipune build, the
model, the data), the warnings that change the reading (failed pairs first, named), the headline
table, each build's difference in a line, and where the files are. About 30 lines a person reads
in a terminal: the report's document (stages.report.sections) as plain text; every number is in
report.json, every table in report.md. The HTML report's first page shows the same pieces
(stages.report.report_page)."""

from __future__ import annotations

from vipune_eval.stages.report.document import Document, Table, plain
from vipune_eval.stages.report.sections.contents import FILES


def aligned(table: Table) -> list[str]:
    """A table in columns of spaces: the first left, the others right."""
    widths = [max(len(c), *(len(r[i]) for r in table.rows)) for i, c in enumerate(table.columns)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(table.columns), *(line(r) for r in table.rows)]


def text(doc: Document) -> str:
    lines = [f"vipune-eval: {doc.pairs} pairs scored; {doc.protocol}.", *(f"  {plain(i)}" for i in doc.identity)]
    if doc.warnings:
        lines += ["", "warnings:", *(f"  ! {plain(w)}" for w in doc.warnings)]
    lines += [
        "",
        "recall@k: the share of a pair's gold sessions among the first k results; brackets: 95% intervals.",
        "",
        *aligned(doc.headline),
    ]
    if doc.builds:
        lines += [
            "",
            f"vipune builds against {doc.primary_build} ({doc.primary_source}); each number is the "
            f"build's, then {doc.primary_build}'s:",
            *(f"  {b}" for b in doc.builds),
        ]
    lines += ["", "files:", *(f"  {path:<22} {what}" for path, what in FILES)]
    return "\n".join(lines) + "\n"
