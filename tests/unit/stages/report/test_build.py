"""The report without Snakemake (issue 28): ``build`` turns hand-made loaded inputs into the report
(no file read), ``render`` turns a report into Markdown. The metrics come from the score stage's
own function on a small hand-made run, so their shape is the real one."""

from __future__ import annotations

import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vipune_eval.registry.models import PINS
from vipune_eval.stages.embed.tally import Tally
from vipune_eval.stages.filter.pairs import PAIRS_SCHEMA
from vipune_eval.stages.report.build import Loaded, LoadedView, build
from vipune_eval.stages.report.markdown import render
from vipune_eval.vipune.contract import EMBED_MODEL_ID, EMBED_MODEL_REVISION
from vipune_eval.stages.score import run_score

KS = [1, 5, 10]
MEASURES = ["recall", "recall_any", "recall_all", "ndcg", "mrr"]
GOLD = {f"q{i}": [f"g{i}"] for i in range(8)}
CATEGORY = {f"q{i}": ("temporal-reasoning" if i < 6 else "multi-session") for i in range(8)}
RANKED = {  # per retriever: the rank of each pair's gold session (None: not retrieved)
    "vipune": [1, 1, 2, 3, None, 1, 1, 6],
    "hybrid": [1, 1, 2, 3, None, 1, 1, 6],
    "dense": [2, 1, 4, None, None, 1, 3, 1],
}


def metrics(tmp_path, name: str) -> dict:
    pairs = tmp_path / "pairs.parquet"
    pq.write_table(pa.Table.from_pylist([
        {"question_id": q, "question_type": CATEGORY[q], "question": "?", "question_date": "", "split":
         "dev" if q in ("q0", "q1") else "test", "gold": g, "gold_source": "answer_session_ids",
         "session_ids": [*g, "x"], "user_side_evidence": True} for q, g in GOLD.items()], schema=PAIRS_SCHEMA), pairs)
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 {g[0]} 1\n" for q, g in GOLD.items()))
    run = tmp_path / f"{name}.in.run"
    lines = []
    for (q, g), rank in zip(GOLD.items(), RANKED[name]):
        docs = [f"{q}-filler{n}" for n in range(9)]
        if rank is not None:
            docs.insert(rank - 1, g[0])
        lines += [f"{q} Q0 {d} {r} {100 - r} {name}" for r, d in enumerate(docs[:10], 1)]
    run.write_text("\n".join(lines) + "\n")
    run_score(qrels, pairs, [run], KS, MEASURES, name, tmp_path / f"{name}.run", tmp_path / f"{name}.json")
    return json.loads((tmp_path / f"{name}.json").read_text())


@pytest.fixture
def loaded(tmp_path) -> Loaded:
    m = {name: metrics(tmp_path, name) for name in RANKED}
    entry = {"name": "session", "folder": "", "protocol": "seed", "granularity": "session",
             "description": "seed protocol, session rows", "ks": KS, "measures": MEASURES,
             "qrels": "results/filter/qrels.txt", "builds": {}}
    summary = {"pairs": 8, "instances": 9, "abstention": 1, "per_category": {"multi-session": 2, "temporal-reasoning": 6},
               "split": {"seed": 0, "dev_fraction": 0.25, "dev": 2, "test": 6}}
    manifest = {"views": [entry], "retrievers": ["dense", "hybrid", "vipune"], "settings": {}, "corpus": None,
                "primary": None, "builds": [], "baseline": None,
                "whatif": None, "mirrors": {"vipune": "hybrid"},
                "roles": {"bm25_and": None, "hybrid_and": "hybrid", "hybrid_or": None}}
    rows = [{"question_id": q, "gold": g, "row_sessions": [g[0], "x"], "row_text_ids": [f"t-{q}", "tx"]}
            for q, g in GOLD.items()]
    return Loaded(manifest=manifest, views=[LoadedView(entry, summary, m, {"rows": 16, "unique_texts": 9, "tokens_embedded": 900})],
                  gold={q: set(g) for q, g in GOLD.items()}, rows_with_gold=rows,
                  truncated={**{f"t-{q}": q == "q7" for q in GOLD}, "tx": False},
                  tallies=[Tally(texts=9, tokens=900, squares=90_000, seconds=2.0, threads=2,
                                 shape={"layers": 6, "hidden": 384, "intermediate": 1536})],
                  builds={}, lab={}, fingerprints={}, preflights={},
                  dataset={"kind": "dataset", "sha256": "ab" * 32, "filename": "lme.json"},
                  model={"kind": "model", "repo_id": "m/x", "revision": "r" * 40, "file": "model.onnx",
                         "pooling": "mean", "files": {"model.onnx": "cd" * 32}},
                  config={"model": {"path": "/models/x"}})


def test_build_takes_every_number_from_what_was_loaded(loaded):
    report = build(loaded)
    vipune = loaded.views[0].metrics["vipune"]
    assert report["retrievers"]["vipune"]["metrics"] == vipune["metrics"]
    assert report["retrievers"]["dense"]["metrics"]["recall@1"] == pytest.approx(3 / 8)
    assert set(report["comparisons"]) == {"vipune vs hybrid", "vipune vs dense"}
    assert report["diagnostics"]["vipune_vs_hybrid"]["same_top1_share"] == 1.0
    truncation = report["diagnostics"]["truncation"]
    assert truncation["pairs_with_truncated_gold"] == 1 and truncation["session_texts"] == 9
    [cpu] = report["embed"]["providers"]
    assert report["embed"]["texts"] == 9 and cpu["provider"] == "cpu" and cpu["texts_per_s"] == 4.5
    assert report["provenance"]["dataset"] is loaded.dataset and report["builds"] == []
    assert report["splits"]["test"]["pairs"] == 6 and "dev" in report["splits"]


READS: list[list[str]] = []  # while a test watches: each file the process opened (an audit hook stays)
HOOKED: list = []            # the audit hook, once added (it cannot be removed)
FILE_EVENTS = {"open", "os.listdir", "os.scandir", "glob.glob", "sqlite3.connect", "mmap.__new__", "shutil.copyfile"}


def _audit(event: str, args: tuple) -> None:
    if READS and event in FILE_EVENTS:
        READS[-1].append(f"{event} {args[0] if args else ''}")


@pytest.fixture
def no_file_read(monkeypatch, tmp_path):
    """Every file the process opens while the test runs, as Python's audit hook sees it
    (builtins.open, io.open, os.open, Path.open/read_text/read_bytes, sqlite3, mmap, listings),
    and pyarrow's readers, whose C++ opens no hook sees, refused; the working directory an empty
    folder, so a results/ path the manifest names is not there either."""
    import pyarrow
    import pyarrow.dataset

    if not HOOKED:
        sys.addaudithook(_audit)
        HOOKED.append(_audit)

    def refuse(name):
        def read(*args, **kwargs):
            raise AssertionError(f"{name} {args[0] if args else ''}")
        return read

    for module, names in ((pq, [n for n in dir(pq) if n.startswith("read_")] + ["ParquetFile", "ParquetDataset"]),
                          (pyarrow, ["memory_map", "OSFile", "input_stream", "open_stream", "open_file"]),
                          (pyarrow.dataset, ["dataset"])):
        for name in names:
            if hasattr(module, name):
                monkeypatch.setattr(module, name, refuse(f"{module.__name__}.{name}"))
    monkeypatch.chdir(tmp_path)
    READS.append([])
    try:
        yield READS[-1]
    finally:
        READS.pop()


def test_build_reads_no_file(loaded, no_file_read):
    build(loaded)
    assert no_file_read == []


def test_render_gives_the_headline_table_and_the_sections(loaded):
    report = build(loaded)
    text = render(report)
    row = next(line for line in text.splitlines() if line.startswith("| vipune |"))
    recall1 = report["retrievers"]["vipune"]["metrics"]["recall@1"]
    assert row.startswith(f"| vipune | 8 | {recall1:.3f} [")
    for heading in ("## Overall (95% intervals in brackets)", "## recall@10 per category",
                    "## Held-out split", "## Paired comparisons", "## Diagnostics", "## Embed throughput"):
        assert heading in text
    assert "**vipune vs dense**" in text


def test_render_of_an_embed_stage_that_computed_nothing(loaded):
    loaded.tallies = [Tally(threads=2, job_seconds=1.5)]
    text = render(build(loaded))
    assert "no embed job timed a text" in text and "1.5 s" in text


def test_the_documents_have_the_declared_shapes(loaded):
    """The metrics file and report.json hold the keys their TypedDicts declare (issue 28)."""
    from vipune_eval.stages.report.build import Report
    from vipune_eval.stages.score import Metrics

    metrics = loaded.views[0].metrics["vipune"]
    assert Metrics.__required_keys__ <= set(metrics) <= set(Metrics.__annotations__)
    report = build(loaded)
    assert set(report) <= set(Report.__annotations__)
    assert set(Report.__annotations__) - set(report) == {"baseline", "whatif", "official"}


def test_fewer_than_ten_pairs_get_no_bootstrap_interval_and_the_report_says_so(loaded):
    """Issue 31: 2 pairs of 1.0 used to read 1.000 [1.00, 1.00]. The score stage writes no
    interval for a fractional metric over fewer than 10 pairs; Wilson intervals stay."""
    vipune = loaded.views[0].metrics["vipune"]
    multi = vipune["per_category"]["multi-session"]
    assert multi["pairs"] == 2 and multi["recall@10"] == 1.0
    assert multi["intervals"]["recall@10"] is None and multi["intervals"]["mrr"] is None
    low, high = multi["intervals"]["recall_any@10"]  # Wilson on 2 of 2: wide, not [1, 1]
    assert low < 0.5 and high == 1.0
    assert vipune["intervals"]["recall@1"] is None  # 8 pairs overall
    text = render(build(loaded))
    table = text[text.index("## recall@10 per category"):text.index("## Held-out split")]
    assert "| retriever | multi-session (2 pairs) | temporal-reasoning (6 pairs) |" in table
    assert "| vipune | 1.000 [no CI] |" in table
    assert "fewer than 10 pairs, too few for a bootstrap interval" in table


def test_ten_pairs_get_their_bootstrap_interval(tmp_path):
    from vipune_eval.stages.score import metric_intervals

    rows = [{"recall@5": v, "recall_any@5": v} for v in [1.0, 0.5] * 5]
    intervals = metric_intervals(rows, ["recall@5", "recall_any@5"])
    low, high = intervals["recall@5"]
    assert low < 0.75 < high
    assert metric_intervals(rows[:9], ["recall@5"]) == {"recall@5": None}


def test_each_build_is_named_with_where_it_came_from(loaded):
    primary, other = "0.20.1-aaaaaaaaaaaa", "0.20.1-bbbbbbbbbbbb"
    loaded.manifest.update(primary=primary, builds=[other])
    loaded.sources = {primary: "vipune.binary 'vipune' = /usr/local/bin/vipune",
                      other: "vipune.compare '/opt/k60/vipune'"}
    loaded.builds = {other: loaded.views[0].metrics["dense"]}
    loaded.fingerprints = {b: {"id": b, "version": "0.20.1", "sha256": b[-12:] * 5} for b in (primary, other)}
    loaded.preflights = {primary: {"follows_contract": True, "failed_checks": []}}
    report = build(loaded)
    assert [b["source"] for b in report["builds"]] == [loaded.sources[primary], loaded.sources[other]]
    text = render(report)
    assert (f"| {primary} (primary) | 0.20.1 | aaaaaaaaaaaa | vipune.binary 'vipune' = /usr/local/bin/vipune | 8 |"
            in text)
    assert f"| {other} | 0.20.1 | bbbbbbbbbbbb | vipune.compare '/opt/k60/vipune' | 8 |" in text
    # the pairs whose gold moved, each with its recall@k before and after (q0: rank 1 → 2)
    assert "  - q0 (temporal-reasoning): recall@1 1.00 → 0.00" in text


def test_the_embed_projection_says_what_it_rests_on(loaded):
    text = render(build(loaded))
    line = next(line for line in text.splitlines() if line.strip().startswith("- what this projection rests on"))
    assert "this run's texts (mean 100 tokens; LongMemEval_M's session texts average 501" in line
    assert "calm 2-core machine" in line and "plan a LongMemEval_M run with that one" in line


def test_the_official_views_recall_all_convention_is_explained(loaded):
    report = build(loaded)
    session = report["views"]["session"]
    official = {**session, "protocol": "official", "description": "LongMemEval's protocol",
                "measures": {"recall_any": "…", "recall_all": "…"},
                "summary": {**session["summary"], "pairs_all": 8, "skipped_without_user_side_evidence": 3,
                            "skip_rule": "run_retrieval.py's", "pairs_with_empty_gold": 0},
                "retrievers": {n: {**e, "metrics_all": e["metrics"], "intervals_all": e["intervals"], "pairs_all": 8}
                               for n, e in session["retrievers"].items()}}
    report["views"]["official"] = official
    text = render(report)
    assert "`metrics_all` holds the 3 pairs without user-side evidence, every one with no gold, so there " \
           "recall_all can exceed recall_any" in text


def test_the_summary_a_finished_run_prints_last(loaded):
    """Issue 31: about 30 lines a person reads: the headline table (vipune first), warnings that
    change the reading, and where the files are; not report.json."""
    from vipune_eval.stages.report import summary

    report = build(loaded)
    lines = summary.render(report).splitlines()
    assert len(lines) <= 30
    start = lines.index("retriever  pairs       recall@1       recall@5      recall@10")
    assert [line.split()[0] for line in lines[start + 1:start + 4]] == ["vipune", "dense", "hybrid"]
    recall = report["retrievers"]["vipune"]["metrics"]
    assert lines[start + 1].split()[1:3] == ["8", f"{recall['recall@1']:.3f}"]
    warnings = lines[lines.index("warnings:") + 1:lines.index("files:") - 1]
    assert any("1 pairs have a truncated gold session" in w for w in warnings)
    assert any("fewer than 10 pairs, too few for a bootstrap interval" in w for w in warnings)
    assert lines[-3:] == [f"  {path:<22} {what}" for path, what in summary.FILES]


def test_the_summary_gives_each_build_one_line_and_its_failed_preflight(loaded):
    from vipune_eval.stages.report import summary

    primary, other = "0.20.1-aaaaaaaaaaaa", "0.20.1-bbbbbbbbbbbb"
    loaded.manifest.update(primary=primary, builds=[other])
    loaded.sources = {other: "vipune.compare '/opt/k60/vipune'"}
    loaded.builds = {other: loaded.views[0].metrics["dense"]}
    loaded.fingerprints = {b: {"id": b, "version": "0.20.1", "sha256": b[-12:] * 5} for b in (primary, other)}
    loaded.preflights = {primary: {}, other: {"follows_contract": False, "failed_checks": ["rrf_k25_ranks_from_1"]}}
    report = build(loaded)
    text = summary.render(report)
    r = report["builds"][1]["comparison"]["overall"]["recall@5"]
    assert (f"  {other} (vipune.compare '/opt/k60/vipune'): recall@5 {r['a']:.3f} vs {r['b']:.3f} "
            f"({100 * r['difference']:+.1f} points") in text
    assert f"  ! {other} fails preflight: rrf_k25_ranks_from_1" in text


def test_the_html_page_puts_each_plot_beside_its_numbers(loaded, tmp_path):
    from vipune_eval.stages.report import html
    from vipune_eval.stages.report.sections import document

    report = build(loaded)
    png = tmp_path / "recall_at_k.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n")
    categories = tmp_path / "recall_per_category.png"
    categories.write_bytes(b"\x89PNG\r\n\x1a\n")
    page = html.page(document(report), {"recall_at_k": png, "recall_per_category": categories})
    overall = page[page.index("<h2>Overall"):page.index("<h2>recall@1 per category")]
    assert '<div class="beside"><div class="numbers">' in overall and overall.count("data:image/png") == 1
    assert "<th class=num>recall@1</th>" in overall and "<tr class=vipune><td>vipune</td><td class=num>8</td>" in overall
    per_category = page[page.index("<h2>recall@5 per category"):page.index("<h2>recall@10 per category")]
    assert per_category.count("data:image/png") == 1  # the primary k's table
    assert page.count("data:image/png") == 2
    for heading in ("Held-out split", "Paired comparisons", "Diagnostics", "Embed throughput"):
        assert f"<h2>{heading}" in page
    assert "<strong>vipune vs dense</strong>" in page and "<code>" in page


def test_the_html_reports_first_page_holds_the_headline_and_what_was_scored(loaded, tmp_path):
    from vipune_eval.stages.report import html
    from vipune_eval.stages.report.sections import document

    report = build(loaded)
    png = tmp_path / "recall_at_k.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n")
    front = html.front(document(report), {"recall_at_k": png})
    first_table = front[front.index("<table>"):front.index("</table>")]
    rows = document(report).headline.rows
    assert first_table.index(f"<td>{rows[0][0]}</td>") < first_table.index(f"<td>{rows[1][0]}</td>")
    assert f"<td class=num>{rows[0][2]}</td>" in first_table
    assert "<h3>What was scored</h3>" in front and "dataset" in front and "model: files from /models/x" in front
    assert "<h3>Warnings</h3>" in front and "vipune-eval report" not in front  # report.md's title is left out


def test_the_html_renders_each_block_of_the_document():
    """The HTML page renders the document's blocks (no Markdown is parsed): headings, lists two
    deep, tables with their numeric columns and vipune's lanes marked, paragraphs, inline marks."""
    from vipune_eval.stages.report import html
    from vipune_eval.stages.report.document import Bullets, Item, Paragraph, Section, Table

    out = html.section(Section("t", "T", [Bullets([Item("a `x` <b>", ["sub"]), Item("b")]),
                                          Table(["h", "n"], [["r", "1"], ["vipune", "2"]], marked=frozenset({1})),
                                          Paragraph("**bold** line next")], level=1))
    assert out == ("<h1>T</h1>\n<ul><li>a <code>x</code> &lt;b&gt;<ul><li>sub</li></ul></li><li>b</li></ul>\n"
                   "<div class=scroll><table><thead><tr><th>h</th><th class=num>n</th></tr></thead>"
                   "<tbody><tr><td>r</td><td class=num>1</td></tr><tr class=vipune><td>vipune</td>"
                   "<td class=num>2</td></tr></tbody></table></div>\n"
                   "<p><strong>bold</strong> line next</p>")


def test_each_plot_has_its_caption_and_stands_beside_its_section(loaded, tmp_path):
    """A plot is one entry of plots.PLOTS: its caption file exists, and the HTML page puts it beside
    the section its entry names (here every section this report has: no granularities, no lab)."""
    from support.scenarios import REPO
    from vipune_eval.stages.report import html
    from vipune_eval.stages.report.plots import PLOTS
    from vipune_eval.stages.report.sections import document

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


BGE, BGE_AT = EMBED_MODEL_ID, EMBED_MODEL_REVISION
AS = f"{BGE}@{BGE_AT[:12]}"  # as the report names the model
ONNX = PINS[BGE, BGE_AT]["onnx/model.onnx"][:12]  # its pinned ONNX file, as the report names it


@pytest.mark.parametrize("path, onnx, pinned, words", [
    # issue 36 item 6: a local folder of other bytes laid out as bge-small says they are not its pinned ones
    ("/models/minilm", "003dfe404dce" + "0" * 52, False,
     f"model: files from /models/minilm laid out as {AS} `model.onnx` (sha256 "
     f"003dfe404dce), mean pooling + L2: not the pinned bytes of {AS} (pinned: "
     f"`onnx/model.onnx` sha256 {ONNX}): numbers are not comparable with runs on the pinned model"),
    ("/models/bge", None, True,
     f"model: files from /models/bge laid out as {AS} `model.onnx` (sha256 "
     f"{ONNX}), mean pooling + L2: the pinned bytes of {AS}"),
    (None, None, True,
     f"model: {AS} `model.onnx` (sha256 {ONNX}), downloaded, mean pooling "
     f"+ L2: the pinned bytes of {AS}"),
])
def test_the_model_line_says_whether_the_files_are_the_pinned_bytes(loaded, path, onnx, pinned, words):
    """Issues 36 item 6 and 39 item 6: report.md's model line and provenance.model say where the
    files came from and whether they are the pinned bytes of the model they are laid out as."""
    from vipune_eval.registry.models import pins
    from vipune_eval.stages.report import summary

    pinned_files = pins(BGE, BGE_AT)
    loaded.model = {"kind": "model", "repo_id": BGE, "revision": BGE_AT, "file": "model.onnx", "pooling": "mean",
                    "files": {"model.onnx": onnx or pinned_files["onnx/model.onnx"],
                              "tokenizer.json": pinned_files["tokenizer.json"]}}
    loaded.config = {"model": {"path": path}}
    report = build(loaded)
    model = report["provenance"]["model"]
    assert (model["source"], model["path"], model["pinned"]) == ("local" if path else "download", path, pinned)
    assert model["pins"]["onnx/model.onnx"] == {"pinned": pinned_files["onnx/model.onnx"], "found": model["files"]["model.onnx"]}
    assert f"- {words}\n" in render(report)
    assert summary.render(report).splitlines()[1] == f"  {words.replace('`', '')}"  # the summary's first lines


def test_a_model_with_no_pins_says_its_bytes_are_not_checked(loaded):
    report = build(loaded)
    assert report["provenance"]["model"]["pinned"] is None and report["provenance"]["model"]["pins"] is None
    assert ("- model: files from /models/x laid out as m/x@rrrrrrrrrrrr `model.onnx` (sha256 cdcdcdcdcdcd), mean "
            "pooling + L2: m/x@rrrrrrrrrrrr has no pins, so these bytes are recorded, not checked\n") in render(report)


def test_the_summary_opens_with_the_vipune_build_the_model_and_the_data(loaded):
    """Issue 39 item 6: summary.txt's first lines name the vipune build (version and fingerprint
    id, where it came from), the model and the data by what they are; report.md's lines too."""
    from vipune_eval.stages.report import summary

    primary = "0.20.1-aaaaaaaaaaaa"
    loaded.manifest.update(primary=primary, corpus={
        "preset": None, "release": "local", "source": "the local file lme.json", "sha256": "ab" * 32,
        "note": "a local file that is none of the pinned releases"})
    loaded.sources = {primary: "vipune.binary 'vipune' = /usr/local/bin/vipune"}
    loaded.fingerprints = {primary: {"id": primary, "version": "0.20.1", "sha256": "aa" * 32}}
    loaded.preflights = {primary: {}}
    report = build(loaded)
    lines = summary.render(report).splitlines()
    assert lines[1:4] == [
        "  vipune 0.20.1, build 0.20.1-aaaaaaaaaaaa, from vipune.binary 'vipune' = /usr/local/bin/vipune",
        "  model: files from /models/x laid out as m/x@rrrrrrrrrrrr model.onnx (sha256 cdcdcdcdcdcd), mean pooling + "
        "L2: m/x@rrrrrrrrrrrr has no pins, so these bytes are recorded, not checked",
        "  corpus: local (the local file lme.json, sha256 abababababab…): a local file that is none of the pinned releases"]
    assert (f"- vipune 0.20.1 (binary sha256 {'aa' * 32}; the contract was checked against {report['provenance']['contract_release']})"
            f": build {primary}, from vipune.binary 'vipune' = /usr/local/bin/vipune\n") in render(report)
    loaded.manifest.update(corpus=None)  # no corpus block: the dataset's line names the data
    assert summary.render(build(loaded)).splitlines()[3] == "  dataset local file lme.json (sha256 abababababab): 8 pairs"


def test_the_summary_names_the_lane_build_and_report_md_lists_where_the_lanes_differ(loaded):
    """Issue 37: the lib lane's build (the vipune source it was built from, a release or a checkout
    with its git description) is named in summary.txt's first lines and report.md's; every pair
    where the lib lane and the binary rank differently is named, never averaged away."""
    from vipune_eval.stages.report import summary

    primary, lane = "0.20.2-aaaaaaaaaaaa", "0.20.2-cccccccccccc"
    loaded.manifest.update(primary=primary, retrievers=["dense", "hybrid", "vipune", "vipune-lib"])
    loaded.fingerprints = {primary: {"id": primary, "version": "0.20.2", "sha256": "aa" * 32}}
    loaded.preflights = {primary: {}}
    loaded.lane = {"id": lane, "sha256": "cc" * 32, "version": "0.20.2", "binary": primary,
                   "built": {"vipune_source": "checkout /src/vipune (v0.20.2-3-gabc1234-dirty)", "lane_source": "ee" * 32}}
    lib = json.loads(json.dumps(loaded.views[0].metrics["vipune"]))  # the binary's, but for one pair
    lib["per_query"]["q3"]["ranked"] = list(reversed(lib["per_query"]["q3"]["ranked"]))
    loaded.views[0].metrics["vipune-lib"] = lib
    report = build(loaded)
    line = (f"vipune-lane {lane} (sha256 cccccccccccc): vipune's search code from checkout /src/vipune "
            f"(v0.20.2-3-gabc1234-dirty), beside build {primary}, lane/ sources eeeeeeeeeeee")
    assert f"  {line}" in summary.render(report).splitlines()[1:4]
    assert f"- {line}\n" in render(report)
    [agree] = report["diagnostics"]["lanes"]
    assert (agree["run"], agree["mirror"], agree["differ_top10"]) == ("vipune-lib", "vipune", ["q3"])
    assert "they differ on 1: q3." in render(report)
    assert any("vipune-lib" in w and "q3" in w for w in summary.render(report).splitlines())


def test_a_failed_preflight_reads_the_same_in_the_builds_table_and_the_warnings(loaded):
    """Issue 38: the summary's warning for a build that fails its preflight gives the words of
    report.md's builds table (the drift, where the preflight named it), from one owner."""
    from vipune_eval.stages.report import html, summary
    from vipune_eval.stages.report.sections import document, failed_preflight

    drift = ("RRF k differs: same order, other scores (vipune's fused scores fit k = 60; the contract and the "
             "hybrid mirrors use k = 25)")
    primary, other = "0.20.2-aaaaaaaaaaaa", "0.20.2-bbbbbbbbbbbb"
    loaded.manifest.update(primary=primary, builds=[other])
    loaded.builds = {other: loaded.views[0].metrics["vipune"]}
    loaded.fingerprints = {b: {"id": b, "version": "0.20.2", "sha256": b[-12:] * 5} for b in (primary, other)}
    loaded.preflights = {primary: {}, other: {"follows_contract": False, "failed_checks": ["rrf_k25_ranks_from_1"],
                                              "drift": [drift]}}
    report = build(loaded)
    words = failed_preflight(report["builds"][1])
    assert words == f"fails preflight: {drift}"
    assert f"| {other} — {words} | 0.20.2 |" in render(report)
    assert f"  ! {other} {words}; its search does not do what the contract says" in summary.render(report)
    assert f"{other} {words}; its search" in html.front(document(report), {})


def test_refused_questions_are_named_with_why_in_the_first_lines(loaded, fake_vipune_bin, vipune_hf_home, tmp_path):
    """Issue 38: under vipune.on_error: record, a question vipune refuses (over 512 tokens: exit 3)
    is named, with why, in the summary's and report.md's first lines. The message is the one the
    vipune client records for the fake vipune's refusal, as the real one refuses."""
    from vipune_eval.stages.report import summary
    from vipune_eval.vipune.client import Vipune, VipuneError, VipuneSettings

    client = Vipune(fake_vipune_bin, tmp_path / "home", 30, hf_home=vipune_hf_home)
    with pytest.raises(VipuneError) as refused:
        settings = VipuneSettings(str(fake_vipune_bin), tmp_path / "fp.json", vipune_hf_home, tmp_path, 30)
        flags = settings.search_flags(10, True)
        client.search(tmp_path / "memories.db", "q3", " ".join(["word"] * 600), flags, "persona q3")
    injected = "persona q6: `vipune --json search --hybrid -- why` exited 1: injected; stderr: "
    loaded.views[0].metrics["vipune"]["failed"] = {"q3": str(refused.value), "q5": str(refused.value), "q6": injected}
    report = build(loaded)
    lines = summary.render(report).splitlines()
    why = "left out of every average (vipune.on_error: record; report.json lists why)"
    assert lines[4:7] == ["warnings:",
                          f"  ! vipune: 2 pairs failed and are {why}; vipune refuses a question over 512 tokens (exit 3): q3, q5",
                          f"  ! vipune: 1 pair failed and is {why}; vipune exited 1: q6"]
    text = render(report).splitlines()
    assert text[text.index("## Warnings") + 2] == (f"- vipune: 2 pairs failed and are {why}; vipune refuses a question over "
                                                   "512 tokens (exit 3): q3, q5")
    assert text.index("## Warnings") < 12 and text.index("## Warnings") < text.index("## Overall (95% intervals in brackets)")


def test_the_document_takes_no_order_from_report_jsons_mappings(loaded):
    """report.md is rendered in the report job and the HTML page from report.json (sorted keys):
    every order a reader sees (measures, retrievers, comparisons, granularities) is set by the
    sections, so any order of report.json's mappings gives the same document."""
    from vipune_eval.stages.report.sections import document

    def reorder(value, reverse):
        if isinstance(value, dict):
            return {k: reorder(value[k], reverse) for k in sorted(value, reverse=reverse)}
        return [reorder(v, reverse) for v in value] if isinstance(value, list) else value

    report = build(loaded)
    assert document(reorder(report, False)) == document(reorder(report, True)) == document(report)
    text = render(report)
    assert text.index("**vipune vs dense**") < text.index("**vipune vs hybrid**")  # the report's order
    assert "| retriever | pairs | recall@1 | recall@5 | recall@10 | recall_any@1 |" in text


def test_a_lane_is_one_entry_of_the_lanes_table(loaded, tmp_path, monkeypatch):
    """vipune-lib (vipune's code through vipune-lane) is a Lane: first in the headline and marked
    in the HTML, set against the binary's run it must rank as; a pair where they differ is named in
    report.md's diagnostics and the summary's warnings."""
    from vipune_eval.stages.report import html, lanes, summary
    from vipune_eval.stages.report.sections import document

    assert "vipune-lib" in lanes.NAMES
    monkeypatch.setitem(RANKED, "vipune-lib", [1, 1, 2, 3, None, 1, 1, 1])  # q7's gold at 1, not 6
    loaded.views[0].metrics["vipune-lib"] = metrics(tmp_path, "vipune-lib")
    loaded.manifest["retrievers"] = ["dense", "vipune-lib", "hybrid", "vipune"]
    report = build(loaded)
    assert report["retriever_order"] == ["vipune-lib", "vipune", "dense", "hybrid"]
    [lane] = report["diagnostics"]["lanes"]
    assert (lane["run"], lane["mirror"], lane["differ_top10"]) == ("vipune-lib", "vipune", ["q7"])
    assert "vipune-lib (vipune's own search code through vipune-lane, on the cached query vectors) and vipune " \
           "(the binary, with its model) return the same ranking on" in render(report)
    assert "they differ on 1: q7." in render(report)
    assert "vipune-lib (vipune's code, cached vectors) and vipune (the binary) rank 1 of 8 pairs differently: q7" \
           in summary.render(report)
    front = html.front(document(report), {})
    assert front.count("<tr class=vipune>") == 2 and "<tr class=vipune><td>vipune-lib</td>" in front
