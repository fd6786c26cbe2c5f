"""report-page: the report as HTML for Snakemake's HTML report. One self-contained page holds
every section of report.md with each plot beside the numbers it draws (results/html/report-page.html);
the report's first page (results/html/front.html, included by workflow/report/workflow.rst)
holds the headline table, what was scored, the builds' differences and the warnings.

Nothing is worded here: both pages render the report's document (stages.report.sections), as
report.md and the summary do; a plot stands beside the section its entry in
stages.report.plots.PLOTS names.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from vipune_eval.core.io import read_json, write_text
from vipune_eval.stages.report.document import Block, Bullets, Document, Item, Paragraph, Section, Table
from vipune_eval.stages.report.plots import PLOTS
from vipune_eval.stages.report.sections.contents import document

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
#vipune-eval .explain-filter { position: sticky; top: 0; background: #fff; padding: 0.3em 0; }
#vipune-eval .explain-filter input, #vipune-eval .explain-filter select { font: inherit; margin-right: 0.6em; }
"""

# The explanations' filter: a question id typed (a part of it) and a category chosen show the
# explanations that match; an address ending in #explain-<question_id> shows that one.
FILTER_SCRIPT = """
(function () {
  var search = document.getElementById('explain-search'), category = document.getElementById('explain-category'),
      count = document.getElementById('explain-count'), all = document.querySelectorAll('section.explain');
  function show() {
    var text = search.value.trim().toLowerCase(), chosen = category.value, shown = 0;
    all.forEach(function (s) {
      var match = s.id.slice(8).toLowerCase().indexOf(text) >= 0 && (!chosen || s.dataset.category === chosen);
      s.hidden = !match; shown += match ? 1 : 0;
    });
    count.textContent = shown + ' of ' + all.length + ' shown';
  }
  search.addEventListener('input', show); category.addEventListener('change', show);
  var target = location.hash.indexOf('#explain-') === 0 && document.getElementById(location.hash.slice(1));
  if (target) { search.value = target.id.slice(8); }
  show();
  if (target) { target.scrollIntoView(); }  // the sections above it are hidden now
})();
"""


def _inline(text: str) -> str:
    """Escaped text with the document's inline marks: `code` and **bold**."""
    out = html.escape(text, quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)


def table(t: Table) -> str:
    right = t.right()

    def row(cells: list[str], tag: str) -> str:
        return "".join(f"<{tag}{' class=num' if r else ''}>{_inline(c)}</{tag}>" for c, r in zip(cells, right))

    body = "".join(f"<tr{' class=vipune' if i in t.marked else ''}>{row(r, 'td')}</tr>" for i, r in enumerate(t.rows))
    return f"<div class=scroll><table><thead><tr>{row(t.columns, 'th')}</tr></thead><tbody>{body}</tbody></table></div>"


def bullets(b: Bullets, css: str = "") -> str:
    lead = f"<p>{_inline(b.lead)}</p>\n" if b.lead else ""
    items = "".join(
        f"<li{css}>{_inline(item.text)}"
        + ("<ul>" + "".join(f"<li>{_inline(s)}</li>" for s in item.sub) + "</ul>" if item.sub else "")
        + "</li>"
        for item in b.items
    )
    return lead + (f"<ul>{items}</ul>" if b.items else "")


def _list(texts: list[str], css: str = "") -> str:
    return bullets(Bullets([Item(t) for t in texts]), css)


def block(b: Block) -> str:
    if isinstance(b, Table):
        return table(b)
    if isinstance(b, Bullets):
        return bullets(b)
    assert isinstance(b, Paragraph)
    return f"<p>{_inline(b.text)}</p>"


def _image(path: Path, name: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<figure><img alt="{name}" src="data:image/png;base64,{data}"></figure>'


def section(s: Section, plot: tuple[str, Path] | None = None) -> str:
    """A section's heading and blocks; a plot beside the blocks. A section explaining a question is
    an element of its own, found by its key (its id) and filtered by its category."""
    heading = f"<h{s.level}>{_inline(s.title)}</h{s.level}>\n" if s.title else ""
    body = "\n".join(map(block, s.blocks))
    if plot:
        body = f'<div class="beside"><div class="numbers">{body}</div>{_image(plot[1], plot[0])}</div>'
    if s.category is not None:
        return (
            f'<section class=explain id="{html.escape(s.key)}" data-category="{html.escape(s.category)}">'
            f"{heading}{body}</section>"
        )
    return heading + body


def explanation_filter(sections: list[Section]) -> str:
    """The box and the list that filter the explanations, with their script (none without any)."""
    categories = sorted({s.category for s in sections if s.category is not None})
    if not categories:
        return ""
    options = "".join(f'<option value="{html.escape(c)}">{html.escape(c)}</option>' for c in categories)
    return (
        '<p class=explain-filter><input id=explain-search type=search placeholder="question id" '
        'aria-label="question id"><select id=explain-category aria-label=category><option value="">every '
        f"category</option>{options}</select><span id=explain-count></span></p>"
    )


def page(doc: Document, plots: dict[str, Path]) -> str:
    """Every section of the report, each plot beside the section it draws."""
    beside = {p.beside: (p.name, plots[p.name]) for p in PLOTS if p.name in plots}
    parts = [f"<h1>{_inline(doc.title)}</h1>", _list(doc.scored)]
    controls = explanation_filter(doc.sections)
    for s in doc.sections:
        if s.category is not None and controls:  # before the first explanation
            parts.append(controls)
            controls = ""
        parts.append(section(s, beside.get(s.key)))
    script = f"<script>{FILTER_SCRIPT}</script>" if any(s.category is not None for s in doc.sections) else ""
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>vipune-eval report</title>"
        f"<style>{STYLE}</style></head><body><main id=vipune-eval>"
        + "\n".join(parts)
        + f"</main>{script}</body></html>\n"
    )


def front(doc: Document, plots: dict[str, Path]) -> str:
    """The HTML report's first page: the headline table beside the recall@k plot, what was
    scored, the warnings, each build's difference, where the rest is."""
    plot = _image(plots["recall_at_k"], "recall_at_k") if "recall_at_k" in plots else ""
    parts = [
        f"<h2>{doc.pairs} pairs scored</h2>",
        f"<p>{_inline(doc.protocol)}. recall@k: the share of a pair's gold sessions among the "
        "first k results; brackets: 95% intervals.</p>",
        f'<div class="beside"><div class="numbers">{table(doc.headline)}</div>{plot}</div>',
        "<h3>What was scored</h3>",
        _list(doc.scored),
    ]
    if doc.warnings:
        parts += ["<h3>Warnings</h3>", _list(doc.warnings, ' class="warning"')]
    if doc.builds:
        parts += [f"<h3>vipune builds against {html.escape(doc.primary_build or '')}</h3>", _list(doc.builds)]
    parts.append(
        "<p>Every table, each plot beside its numbers: <strong>Report → report.html</strong> in the "
        "menu. The files: <code>results/report.md</code>, <code>results/report.json</code>.</p>"
    )
    # Snakemake shows this text in a narrow column: widen the column that holds it
    style = STYLE + ".max-w-lg:has(#vipune-eval) { max-width: none; }"
    return f"<style>{style}</style><div id=vipune-eval>" + "\n".join(parts) + "</div>\n"


def run_page(report: Path, plots: list[Path], out_page: Path, out_front: Path) -> None:
    doc = document(read_json(report))
    by_name = {p.stem: p for p in plots}
    write_text(out_page, page(doc, by_name))
    write_text(out_front, front(doc, by_name))
