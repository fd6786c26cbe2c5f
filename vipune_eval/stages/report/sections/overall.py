"""The primary view's numbers: the headline table, the overall table, each k per category, the
held-out split, the paired comparisons, and the notes under them (pairs per category, the
measures' definitions)."""

from __future__ import annotations

from vipune_eval.registry import measures
from vipune_eval.stages.report.document import Block, Bullets, Item, Paragraph, Section, Table
from vipune_eval.stages.report.report_json import Comparison, Report, primary_k, primary_ks, recall_keys
from vipune_eval.stages.report.sections.orders import by_measure, by_retriever, ordered, table_keys
from vipune_eval.stages.report.sections.tables import noted, per_category_table, retriever_table


def headline(report: Report) -> Table:
    """Each retriever (vipune's lanes first) with its pairs and recall@k, k of the primary view,
    with intervals."""
    return retriever_table(ordered(report), recall_keys(report))


def overall_section(report: Report) -> list[Section]:
    table = retriever_table(ordered(report), table_keys(report))
    return [Section("overall", "Overall (95% intervals in brackets)", noted(table))]


def per_category_sections(report: Report) -> list[Section]:
    """One section per k; the primary k's is keyed ``per-category`` (its plot stands beside it)."""
    primary = primary_k(report)
    return [
        Section(
            "per-category" if k == primary else f"per-category@{k}",
            f"{key} per category",
            per_category_table(ordered(report), key),
        )
        for k in primary_ks(report)
        for key in [measures.key(measures.PRIMARY, k)]
    ]


def split_section(report: Report) -> list[Section]:
    """The test split's table: each retriever's pairs there (and how many of the split's it failed)."""
    splits, split = report["splits"], report["provenance"]["split"]
    test = by_retriever(report, splits["test"]["retrievers"])
    failed = {n: splits["test"]["pairs"] - e["pairs"] for n, e in test.items()}
    return [
        Section(
            "split",
            f"Held-out split: tune on dev ({splits['dev']['pairs']} pairs), report test "
            f"({splits['test']['pairs']} pairs)",
            [
                Paragraph(f"Split seed {split['seed']}, dev fraction {split['dev_fraction']} ({split['rule']}). Test:"),
                *noted(retriever_table(test, table_keys(report), failed)),
            ],
        )
    ]


def _comparisons(report: Report) -> list[tuple[str, Comparison]]:
    """The paired comparisons ("A vs B") in the report's order of B."""
    compared = report["comparisons"]
    rank = {name: i for i, name in enumerate(report["retriever_order"])}
    return sorted(compared.items(), key=lambda item: (rank.get(item[0].split(" vs ", 1)[-1], len(rank)), item[0]))


def comparisons_section(report: Report) -> list[Section]:
    blocks: list[Block] = [
        Paragraph(
            "Differences on the same pairs, with paired-bootstrap intervals; exact McNemar tests for "
            "recall_any/recall_all, paired randomization tests otherwise; Holm-corrected over every "
            "metric and category of a comparison."
        )
    ]
    blocks += [
        Bullets(list(map(Item, result["summary"])), lead=f"**{label}**") for label, result in _comparisons(report)
    ]
    return [Section("comparisons", "Paired comparisons", blocks)]


def notes_section(report: Report) -> list[Section]:
    counts, defined = report["dataset"]["per_category"], report["measures"]
    return [
        Section(
            "notes",
            "",
            [
                Paragraph("Pairs per category: " + ", ".join(f"{c} {counts[c]}" for c in sorted(counts))),
                Paragraph(
                    "Measures: " + "; ".join(f"{m}: {defined[m]}" for m in by_measure(defined)) + ". "
                    "Failed pairs (vipune.on_error: record) are left out of every average."
                ),
            ],
        )
    ]
