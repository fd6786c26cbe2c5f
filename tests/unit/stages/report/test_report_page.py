"""stages/report/report_page.py (report-page): the report as HTML, each plot beside its numbers, and
the HTML report's first page."""

from __future__ import annotations

from vipune_eval.stages.report.report import build


def test_the_html_page_puts_each_plot_beside_its_numbers(loaded, tmp_path):
    from vipune_eval.stages.report import report_page as html
    from vipune_eval.stages.report.sections.contents import document

    report = build(loaded)
    png = tmp_path / "recall_at_k.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n")
    categories = tmp_path / "recall_per_category.png"
    categories.write_bytes(b"\x89PNG\r\n\x1a\n")
    page = html.page(document(report), {"recall_at_k": png, "recall_per_category": categories})
    overall = page[page.index("<h2>Overall") : page.index("<h2>recall@1 per category")]
    assert '<div class="beside"><div class="numbers">' in overall and overall.count("data:image/png") == 1
    assert (
        "<th class=num>recall@1</th>" in overall and "<tr class=vipune><td>vipune</td><td class=num>8</td>" in overall
    )
    per_category = page[page.index("<h2>recall@5 per category") : page.index("<h2>recall@10 per category")]
    assert per_category.count("data:image/png") == 1  # the primary k's table
    assert page.count("data:image/png") == 2
    for heading in ("Held-out split", "Paired comparisons", "Diagnostics", "Embed throughput"):
        assert f"<h2>{heading}" in page
    assert "<strong>vipune vs dense</strong>" in page and "<code>" in page


def test_the_html_reports_first_page_holds_the_headline_and_what_was_scored(loaded, tmp_path):
    from vipune_eval.stages.report import report_page as html
    from vipune_eval.stages.report.sections.contents import document

    report = build(loaded)
    png = tmp_path / "recall_at_k.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n")
    front = html.front(document(report), {"recall_at_k": png})
    first_table = front[front.index("<table>") : front.index("</table>")]
    rows = document(report).headline.rows
    assert first_table.index(f"<td>{rows[0][0]}</td>") < first_table.index(f"<td>{rows[1][0]}</td>")
    assert f"<td class=num>{rows[0][2]}</td>" in first_table
    assert "<h3>What was scored</h3>" in front and "dataset" in front and "model: files from /models/x" in front
    assert "<h3>Warnings</h3>" in front and "vipune-eval report" not in front  # report.md's title is left out


def test_the_html_renders_each_block_of_the_document():
    """The HTML page renders the document's blocks (no Markdown is parsed): headings, lists two
    deep, tables with their numeric columns and vipune's lanes marked, paragraphs, inline marks."""
    from vipune_eval.stages.report import report_page as html
    from vipune_eval.stages.report.document import Bullets, Item, Paragraph, Section, Table

    out = html.section(
        Section(
            "t",
            "T",
            [
                Bullets([Item("a `x` <b>", ["sub"]), Item("b")]),
                Table(["h", "n"], [["r", "1"], ["vipune", "2"]], marked=frozenset({1})),
                Paragraph("**bold** line next"),
            ],
            level=1,
        )
    )
    assert out == (
        "<h1>T</h1>\n<ul><li>a <code>x</code> &lt;b&gt;<ul><li>sub</li></ul></li><li>b</li></ul>\n"
        "<div class=scroll><table><thead><tr><th>h</th><th class=num>n</th></tr></thead>"
        "<tbody><tr><td>r</td><td class=num>1</td></tr><tr class=vipune><td>vipune</td>"
        "<td class=num>2</td></tr></tbody></table></div>\n"
        "<p><strong>bold</strong> line next</p>"
    )


def test_each_plot_has_its_caption_and_stands_beside_its_section(loaded, tmp_path):
    """A plot is one entry of plots.PLOTS: its caption file exists, and the HTML page puts it beside
    the section its entry names (here every section this report has: no granularities, no lab)."""
    from support.scenarios import REPO
    from vipune_eval.stages.report import report_page as html
    from vipune_eval.stages.report.plots import PLOTS
    from vipune_eval.stages.report.sections.contents import document

    assert all((REPO / "workflow" / "report" / f"{p.name}.rst").is_file() for p in PLOTS)
    primary, other = "0.20.1-aaaaaaaaaaaa", "0.20.1-bbbbbbbbbbbb"
    loaded.manifest.update(primary=primary, builds=[other])
    loaded.builds = {other: loaded.views[0].metrics["dense"]}
    loaded.fingerprints = {b: {"id": b, "version": "0.20.1", "sha256": b[-12:] * 5} for b in (primary, other)}
    loaded.preflights = {primary: {}}
    doc = document(build(loaded))
    pngs = {}
    for p in PLOTS:
        pngs[p.name] = tmp_path / f"{p.name}.png"
        pngs[p.name].write_bytes(b"\x89PNG\r\n\x1a\n" + p.name.encode())
    page = html.page(doc, pngs)
    keys = [s.key for s in doc.sections]
    placed = [p for p in PLOTS if p.beside in keys]
    assert {p.name for p in placed} == {"recall_at_k", "recall_per_category", "gold_ranks", "latency"}
    assert page.count("<figure>") == len(placed)
    for p in placed:
        section = next(s for s in doc.sections if s.key == p.beside)
        heading = f"<h{section.level}>{section.title}</h{section.level}>"
        figure = page.index(f'<img alt="{p.name}"')
        assert page.rindex("<h", 0, figure) == page.index(heading), p.name
