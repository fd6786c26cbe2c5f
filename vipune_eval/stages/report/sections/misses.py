"""Why vipune misses, as report.md's Diagnostics show it: the session texts embedded truncated,
the questions vipune's AND query finds nothing for, its lanes against their mirrors and each
other (stages.report.sections.agreement), its search latency, and the worst pairs with the rank of
each gold session."""

from __future__ import annotations

from typing import Any

from vipune_eval.registry import lanes
from vipune_eval.stages.report.document import Bullets, Item, Section, Table
from vipune_eval.stages.report.report_json import Report, primary_k, primary_key
from vipune_eval.stages.report.sections import agreement
from vipune_eval.stages.report.sections.orders import by_retriever
from vipune_eval.stages.report.sections.tables import opt

WORST_PAIRS = 20  # the worst pairs listed (and explained: stages.report.explain)


def truncation_warning(report: Report) -> list[str]:
    """The warning that gold sessions were embedded truncated, where any was."""
    t = report["diagnostics"]["truncation"]
    if not t["pairs_with_truncated_gold"]:
        return []
    return [
        f"{t['truncated_share']:.1%} of the session texts are over 512 tokens and were embedded "
        f"truncated; {t['pairs_with_truncated_gold']} pairs have a truncated gold session "
        "(report.md, Diagnostics)"
    ]


def worst_pairs(report: Report) -> list[dict[str, Any]]:
    """The gold ranks of the worst pairs (fewer than all their gold sessions in the top k, the
    headline's k): the diagnostics list them, the report explains them (stages.report.explain)."""
    recall = primary_key(report)
    return [r for r in report["diagnostics"]["gold_ranks"]["pairs"] if r[recall] < 1][:WORST_PAIRS]


def diagnostics_sections(report: Report) -> list[Section]:
    d = report["diagnostics"]
    t = d["truncation"]
    k, recall = primary_k(report), primary_key(report)
    items = [
        Item(
            f"{t['truncated_share']:.1%} of the {t['session_texts']} session texts are over 512 tokens "
            f"(embedded truncated; vipune's own `add` would refuse them); {t['pairs_with_truncated_gold']} "
            f"pairs have a truncated gold session.",
            [
                f"{name}: {recall} {opt(split['truncated_gold'])} with truncated gold, "
                f"{opt(split['untruncated_gold'])} without"
                for name, split in by_retriever(report, t[recall]).items()
                if split["truncated_gold"] is not None
            ],
        )
    ]
    bm25 = d["bm25_and_query"]
    if bm25:
        sub = []
        if f"hybrid_vs_hybrid_or_top{k}_differs" in bm25:
            and_name, or_name = bm25["hybrid_and"], bm25["hybrid_or"]
            and_value, or_value = (bm25[f"{recall}_on_empty_and_pairs"][n] for n in (and_name, or_name))
            sub.append(
                f"{and_name} and {or_name} differ in the top {k} of "
                f"{bm25[f'hybrid_vs_hybrid_or_top{k}_differs']} pairs; on the empty-AND pairs "
                f"{recall} is {opt(and_value)} ({and_name}, AND) vs {opt(or_value)} ({or_name}, OR)."
            )
        items.append(
            Item(
                f"vipune's AND query finds nothing for {bm25['bm25_empty_share']:.1%} of the questions "
                f"({bm25['bm25_empty_pairs']} pairs); there hybrid search is the semantic order.",
                sub,
            )
        )
    items += agreement.items(report)
    for lane in lanes.LANES:
        entry = report["retrievers"].get(lane.hybrid)
        seconds = entry.get("search_seconds") if entry else None
        if seconds and lane.latency:
            items.append(
                Item(
                    f"{lane.hybrid} search latency ({lane.latency}): p50 {seconds['p50']:.3f} s, "
                    f"p95 {seconds['p95']:.3f} s, max {seconds['max']:.3f} s over {seconds['calls']} calls"
                )
            )
    ranks = d["gold_ranks"]
    misses = worst_pairs(report)
    worst = Table(
        ["question", "category", recall, "gold ranks"],
        [
            [
                r["question_id"],
                r["question_type"],
                f"{r[recall]:.2f}",
                ", ".join(f"{g}: {r['gold_ranks'][g] or '–'}" for g in sorted(r["gold_ranks"])),
            ]
            for r in misses
        ],
        numeric=[False, False, True, False],
    )
    return [
        Section("diagnostics", "Diagnostics", [Bullets(items)]),
        Section(
            "worst-pairs",
            f"Worst pairs for {ranks['retriever']} (gold session ranks; – = not retrieved)",
            [worst],
            level=3,
        ),
    ]
