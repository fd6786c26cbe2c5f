"""report-page: the report as HTML for Snakemake's HTML report. One self-contained page holds
every table of report.md with each plot beside the numbers it draws (results/html/report.html);
the report's first page (results/html/front.html, included by workflow/report/workflow.rst)
holds the headline table, the provenance, the builds' differences and the warnings.

Nothing is computed here: the page is report.md (stages.report.markdown) in HTML, the first
page the summary's pieces (stages.report.summary) and report.md's opening lines.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import Any, Mapping

from vipune_eval.core.io import read_json, write_text
from vipune_eval.registry import measures
from vipune_eval.registry.views import PRIMARY
from vipune_eval.stages.report import summary

# plot → the start of the report.md heading whose section it stands beside ({k}: the primary k)
PLACES = {"recall_at_k": "## Overall", "recall_per_category": "## recall@{k} per category",
          "gold_ranks": "### Worst pairs", "granularities": "## Granularities",
          "latency": "## vipune builds", "whatif": "## What-if lab"}

STYLE = """
#vipune-eval { font-family: system-ui, sans-serif; font-size: 14px; line-height: 1.45; color: #1f2933; }
#vipune-eval h1 { font-size: 1.6em; margin: 0.2em 0 0.4em; }
#vipune-eval h2 { font-size: 1.25em; margin: 1.4em 0 0.4em; border-bottom: 1px solid #d9dee3; }
#vipune-eval h3 { font-size: 1.05em; margin: 1.1em 0 0.3em; }
#vipune-eval table { border-collapse: collapse; margin: 0.4em 0 0.8em; font-variant-numeric: tabular-nums; }
#vipune-eval th, #vipune-eval td { border: 1px solid #d9dee3; padding: 0.2em 0.55em; white-space: nowrap; }
#vipune-eval th { background: #f1f4f7; text-align: left; }
#vipune-eval td.num, #vipune-eval th.num { text-align: right; }
#vipune-eval tr.vipune td { background: #fff8e1; font-weight: 600; }
#vipune-eval code { background: #f1f4f7; padding: 0 0.2em; border-radius: 3px; font-weight: normal; }
#vipune-eval code::before, #vipune-eval code::after { content: none; }
#vipune-eval .scroll { overflow-x: auto; max-width: 100%; }
#vipune-eval .beside { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
#vipune-eval .numbers { flex: 1 1 36em; min-width: 0; overflow-x: auto; }
#vipune-eval figure { flex: 0 1 34em; margin: 0.4em 0; }
#vipune-eval figure img { max-width: 100%; border: 1px solid #d9dee3; }
#vipune-eval .warning { color: #8a3c00; }
#vipune-eval ul { padding-left: 1.3em; }
"""


# ---------------------------------------------------------------- report.md → HTML


def _inline(text: str) -> str:
    """Escaped text with report.md's inline marks: `code` and **bold**."""
    out = html.escape(text, quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table(lines: list[str]) -> str:
    head, rule, *rows = lines
    right = [c.endswith(":") for c in _cells(rule)]
    def row(cells: list[str], tag: str) -> str:
        return "".join(f"<{tag}{' class=num' if r else ''}>{_inline(c)}</{tag}>" for c, r in zip(cells, right))
    body = "".join(f"<tr{' class=vipune' if _cells(r)[0].startswith('vipune') else ''}>{row(_cells(r), 'td')}</tr>"
                   for r in rows)
    return (f"<div class=scroll><table><thead><tr>{row(_cells(head), 'th')}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>")


def markdown_to_html(text: str) -> str:
    """report.md's Markdown (headings, tables, lists two deep, paragraphs) as HTML."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
            i += 1
        elif line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(lines[i])
                i += 1
            out.append(_table(block))
        elif line.startswith("- "):
            items: list[tuple[str, list[str]]] = []
            while i < len(lines) and (lines[i].startswith("- ") or lines[i].startswith("  - ")):
                if lines[i].startswith("- "):
                    items.append((lines[i][2:], []))
                else:
                    items[-1][1].append(lines[i][4:])
                i += 1
            out.append("<ul>" + "".join(
                f"<li>{_inline(item)}" + ("<ul>" + "".join(f"<li>{_inline(s)}</li>" for s in sub) + "</ul>"
                                          if sub else "") + "</li>" for item, sub in items) + "</ul>")
        else:
            block = []
            while i < len(lines) and lines[i].strip() and not lines[i].startswith(("#", "|", "- ")):
                block.append(lines[i])
                i += 1
            out.append(f"<p>{_inline(' '.join(block))}</p>")
    return "\n".join(out)


# ---------------------------------------------------------------- the pages


def _image(path: Path, name: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<figure><img alt="{name}" src="data:image/png;base64,{data}"></figure>'


def _sections(text: str) -> list[str]:
    """report.md cut before every heading of level 2 or 3 (the first part: title and provenance)."""
    return re.split(r"\n(?=#{2,3} )", text)


def page(report: Mapping[str, Any], markdown: str, plots: dict[str, Path]) -> str:
    """Every table of report.md, each plot beside the section it draws."""
    k = measures.primary_k(report["views"][PRIMARY.name]["ks"])
    places = {PLACES[name].format(k=k): name for name in plots}
    parts = []
    for section in _sections(markdown):
        name = next((p for heading, p in places.items() if section.startswith(heading)), None)
        body = markdown_to_html(section)
        if name:
            heading, _, rest = body.partition("\n")
            body = (f'{heading}<div class="beside"><div class="numbers">{rest}</div>'
                    f"{_image(plots[name], name)}</div>")
        parts.append(body)
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>vipune-eval report</title>"
            f"<style>{STYLE}</style></head><body><main id=vipune-eval>" + "\n".join(parts)
            + "</main></body></html>\n")


def front(report: Mapping[str, Any], markdown: str, plots: dict[str, Path]) -> str:
    """The HTML report's first page: the headline table beside the recall@k plot, the provenance
    (report.md's opening lines), each build's difference, the warnings, where the rest is."""
    columns, rows = summary.headline(report)
    table = _table(["| " + " | ".join(columns) + " |", "|---|" + "---:|" * (len(columns) - 1),
                    *("| " + " | ".join(r) + " |" for r in rows)])
    plot = _image(plots["recall_at_k"], "recall_at_k") if "recall_at_k" in plots else ""
    provenance = _sections(markdown)[0].split("\n", 1)[1]  # without the "# vipune-eval report" title
    parts = [f"<h2>{report['pairs']} pairs scored</h2>",
             f"<p>{_inline(report['protocol'])}. recall@k: the share of a pair's gold sessions among the "
             "first k results; brackets: 95% intervals.</p>",
             f'<div class="beside"><div class="numbers">{table}</div>{plot}</div>',
             "<h3>What was scored</h3>", markdown_to_html(provenance)]
    builds = summary.build_lines(report)
    if builds:
        parts += [f"<h3>vipune builds against {html.escape(report['builds'][0]['id'])}</h3>",
                  "<ul>" + "".join(f"<li>{_inline(b)}</li>" for b in builds) + "</ul>"]
    warned = summary.warnings(report)
    if warned:
        parts += ["<h3>Warnings</h3>", "<ul>" + "".join(f'<li class="warning">{_inline(w)}</li>'
                                                         for w in warned) + "</ul>"]
    parts.append("<p>Every table, each plot beside its numbers: <strong>Report → report.html</strong> in the "
                 "menu. The files: <code>results/report.md</code>, <code>results/report.json</code>.</p>")
    # Snakemake shows this text in a narrow column: widen the column that holds it
    style = STYLE + ".max-w-lg:has(#vipune-eval) { max-width: none; }"
    return f"<style>{style}</style><div id=vipune-eval>" + "\n".join(parts) + "</div>\n"


def run_page(report: Path, markdown: Path, plots: list[Path], out_page: Path, out_front: Path) -> None:
    data = read_json(report)
    text = markdown.read_text(encoding="utf-8")
    by_name = {p.stem: p for p in plots}
    write_text(out_page, page(data, text, by_name))
    write_text(out_front, front(data, text, by_name))
