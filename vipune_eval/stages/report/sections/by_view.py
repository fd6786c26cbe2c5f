"""The views beside the primary one: the seed protocol's granularities side by side (each against
session), and LongMemEval's own protocol in each of its views, with the paper's published figures
beside our `bm25-lme` where the corpus is the paper's."""

from __future__ import annotations

from vipune_eval.registry import measures
from vipune_eval.registry.views import PRIMARY
from vipune_eval.stages.report.document import Block, Bullets, Item, Paragraph, Section, Table, cell
from vipune_eval.stages.report.report_json import GranularityBlock, Report, primary_key
from vipune_eval.stages.report.sections.orders import by_granularity, by_measure, by_retriever, view_order
from vipune_eval.stages.report.sections.tables import noted, retriever_table


def _cell(block: GranularityBlock, name: str, key: str) -> str:
    """A retriever's ``key`` at a granularity; where any retriever there scored fewer pairs than the
    view has (a failed pair), every cell of the row says its pair count."""
    entry = block["retrievers"].get(name)
    if entry is None:
        return "–"
    fewer = any(e["pairs"] != block["pairs"] for e in block["retrievers"].values())
    return cell(entry["metrics"][key], entry["intervals"][key]) + (f" ({entry['pairs']} pairs)" if fewer else "")


def granularities_section(report: Report) -> list[Section]:
    if not report["granularities"]:
        return []
    grains = {g: report["granularities"][g] for g in by_granularity(report["granularities"])}
    names = list(by_retriever(report, next(iter(grains.values()))["retrievers"]))
    key = primary_key(report)
    rows = [
        [
            g,
            str(block["rows"]),
            str(block["unique_texts"]),
            str(block["tokens_embedded"]),
            *(_cell(block, n, key) for n in names),
        ]
        for g, block in grains.items()
    ]
    items = []
    for g, block in grains.items():
        items += [
            Item(f"{name}, {g} vs session: {result['summary'][0]}")
            for name, result in by_retriever(report, block.get("vs_session", {})).items()
        ]
        short = {n: e["short_lists"] for n, e in by_retriever(report, block["retrievers"]).items() if e["short_lists"]}
        if short:
            items.append(
                Item(
                    f"{g}: pairs whose ranking held fewer distinct sessions than the largest k: "
                    + ", ".join(f"{n} {c}" for n, c in short.items())
                )
            )
    lead = f"Cells: {key}. Rankings of turn and chunk rows collapse to sessions by first occurrence."
    return [
        Section(
            "granularities",
            "Granularities (seed protocol, scored per session)",
            [
                *noted(Table(["granularity", "rows", "unique texts", "tokens embedded", *names], rows)),
                Bullets(items, lead=lead),
            ],
        )
    ]


def published_blocks(report: Report) -> list[Block]:
    """LongMemEval's published figures, our `bm25-lme` beside them where the corpus is the paper's."""
    published = report["official"]["published"]
    cols = sorted({c for row in published["retrievers"].values() for c in row})
    corpus = report.get("corpus")
    on = (
        "; on the paper's original corpus, not this run's cleaned one"
        if corpus and corpus["release"] == "cleaned"
        else ""
    )
    beside = report["official"].get("beside_published", {})
    rows = []
    for name, row in published["retrievers"].items():
        rows.append(
            [f"{name}, published", published["corpus"], "–", *(f"{row[c]:.3f}" if c in row else "–" for c in cols)]
        )
        if b := beside.get(name):  # our run beside it: its metrics_all, then its metrics
            rows += [
                [label, b["ours_corpus"], str(pairs), *(f"{values[c]:.3f}" for c in cols)]
                for label, values, pairs in (
                    (f"`{b['retriever']}` (LongMemEval's BM25), `metrics_all`", b["ours_all"], b["ours_all_pairs"]),
                    (f"`{b['retriever']}`, `metrics` (run_retrieval.py's set)", b["ours"], b["ours_pairs"]),
                )
            ]
    blocks: list[Block] = [
        Paragraph("Published figures on other retrievers (not ours; " + published["source"] + on + "):"),
        Table(["retriever", "corpus", "pairs", *cols], rows, numeric=[False, False, *[True] * (len(cols) + 1)]),
    ]
    if not beside and not (corpus and corpus["same_as_paper"]):
        scored = f"{corpus['preset'] or 'a file'} ({corpus['note']})" if corpus else "a file (an unidentified dataset)"
        blocks.append(Paragraph(f"Not set beside our numbers: this run scored {scored}, not the paper's corpus."))
    elif not beside:
        blocks.append(
            Paragraph(
                "Add the retriever `bm25-lme` (LongMemEval's own BM25) to put our number beside the published BM25 row."
            )
        )
    return blocks


def official_sections(report: Report) -> list[Section]:
    out = []
    views = report["views"]
    for name in (name for name in view_order(report) if views[name]["protocol"] == "official"):
        view = views[name]
        shown = measures.keys(view["ks"], [m for m in by_measure(view["measures"]) if measures.BY_NAME[m].at_k])
        retrievers = by_retriever(report, view["retrievers"])
        s = view["summary"]
        blocks: list[Block] = [
            Paragraph(
                f"{view['description']}. Every one of the {s.get('pairs_all', view['pairs'])} non-abstention "
                f"pairs is searched; `metrics` average the {view['pairs']} pairs run_retrieval.py averages "
                f"({s['skipped_without_user_side_evidence']} left out by {s['skip_rule']}; "
                f"{s['pairs_with_empty_gold']} kept with empty gold)."
            ),
            *noted(retriever_table(retrievers, shown)),
        ]
        every = {
            n: {**e, "metrics": e["metrics_all"], "intervals": e["intervals_all"], "pairs": e["pairs_all"]}
            for n, e in retrievers.items()
            if "metrics_all" in e
        }
        if every:
            blocks += [
                Paragraph(
                    f"`metrics_all`: every non-abstention pair, the set print_retrieval_metrics.py "
                    f"averages ({s.get('pairs_all')} pairs):"
                ),
                *noted(retriever_table(every, shown)),
                Paragraph(
                    "recall_all and recall_any follow LongMemEval's code, where a pair with no gold "
                    "session (its gold keeps only sessions with a user-side `has_answer` turn) scores "
                    "recall_all = 1 (none of its no gold sessions is missing) and recall_any = ndcg_any "
                    f"= 0. `metrics_all` holds the {s['skipped_without_user_side_evidence']} pairs "
                    "without user-side evidence, every one with no gold, so there recall_all can exceed "
                    "recall_any; `metrics` leaves them out, as run_retrieval.py does "
                    f"({s['pairs_with_empty_gold']} pairs with empty gold remain in it)."
                ),
            ]
        blocks.append(Bullets([Item(f"{m}: {view['measures'][m]}") for m in by_measure(view["measures"])]))
        if "official" in report and view["granularity"] == PRIMARY.granularity:  # the paper's figures are per session
            blocks += published_blocks(report)
        out.append(Section(f"view-{name}", f"View {name}: LongMemEval's own protocol", blocks))
    return out
