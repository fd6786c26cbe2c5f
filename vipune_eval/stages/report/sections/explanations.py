"""The explanations (stages.report.explain): for a question, each vipune build's top 10 side by
side, every hit with its rank and score in vipune's semantic arm and BM25 arm and its fused score,
each gold session outside the top 10 with its rank in each arm, the sessions' texts, and what the
arms cannot explain, named; in the report, the pairs a build moved and the worst pairs, each under
the key ``explain-<question_id>`` (the HTML's anchor) with its category (the HTML's filter)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from vipune_eval.registry import measures
from vipune_eval.stages.report.document import Bullets, Item, Paragraph, Section, Table
from vipune_eval.stages.report.report_json import ExplainedColumn, ExplainedHit, Explanation, Report

TOP = 10  # the hits an explanation shows per build
SNIPPET = 120  # the characters of a session's text it shows
NOT_IN_ARM = "not in the arm's candidates"


def anchor(question_id: str) -> str:
    """The key (the HTML id) of a question's explanation."""
    return f"explain-{question_id}"


def _data(text: str) -> str:
    """Dataset text, with the document's inline marks made inert."""
    return text.replace("`", "'").replace("**", "*")


# How an arm's score is shown: a cosine to 3 decimals, SQLite's bm25() (lower is better) to 3 digits
SCORE = {"semantic": "{:.3f}", "bm25": "{:.3g}"}


def _arm(position: list[Any] | None, arm: str, column: ExplainedColumn) -> str:
    if column["k"] is None:
        return "n/a"
    if position is None:
        return "–"
    rank, score = position
    return f"{rank} ({SCORE[arm].format(score)})" if score is not None else str(rank)


def _in_arms(hit: ExplainedHit, column: ExplainedColumn) -> str:
    if column["k"] is None:
        return "its arms: none recorded"
    parts = []
    arms: tuple[tuple[Literal["semantic", "bm25"], str], ...] = (("semantic", "semantic arm"), ("bm25", "BM25 arm"))
    for name, label in arms:
        position = hit[name]
        parts.append(f"{label} rank {_arm(position, name, column)}" if position else f"{label}: {NOT_IN_ARM}")
    return ", ".join(parts)


def explanation(e: Explanation, moved: Sequence[str] = ()) -> Section:
    """One question's explanation, under its anchor and with its category; ``moved``: how it moved
    in each build that moved it, a line each."""
    builds = e["builds"]
    columns = ["rank"]
    for i, c in enumerate(builds):
        columns += [
            f"{c['build']}{' (primary)' if i == 0 else ''}: {c['retriever']}",
            "semantic",
            "bm25",
            f"fused (k {c['k']:g})" if c["k"] is not None else "fused",
        ]
    depth = max((len(c["top"]) for c in builds), default=0)
    rows = []
    for i in range(depth):
        row = [str(i + 1)]
        for c in builds:
            hit = c["top"][i] if i < len(c["top"]) else None
            row += (
                ["", "", "", ""]
                if hit is None
                else [
                    f"**{hit['doc']}** (gold)" if hit["gold"] else hit["doc"],
                    _arm(hit["semantic"], "semantic", c),
                    _arm(hit["bm25"], "bm25", c),
                    "n/a" if hit["fused"] is None else f"{hit['fused']:.5f}",
                ]
            )
        rows.append(row)
    blocks: list[Any] = [Paragraph(f"“{_data(e['question'])}” — gold: " + ", ".join(f"**{g}**" for g in e["gold"]))]
    if moved:
        blocks.append(Bullets([Item(line) for line in moved]))
    if rows:
        blocks.append(Table(columns, rows, numeric=[True] + [False, True, True, True] * len(builds)))
    notes = []
    for c in builds:
        if c["failed"]:
            notes.append(Item(f"{c['build']}: its search failed this pair (no list)"))
            continue
        if c["mismatch"]:
            notes.append(Item(f"**{c['build']}: the arms do not explain this list**: {c['mismatch']}"))
        if c["arms"]:
            notes.append(Item(f"{c['build']}: {c['arms']}"))
        if c["binary"]:
            notes.append(Item(f"{c['build']}: its binary (vipune) ranks otherwise: " + ", ".join(c["binary"])))
        for outside in c["gold_outside"]:
            notes.append(
                Item(f"{c['build']}: gold **{outside['doc']}** is not in the top {TOP}; {_in_arms(outside, c)}")
            )
    if notes:
        blocks.append(Bullets(notes))
    shown = dict.fromkeys([*(hit["doc"] for c in builds for hit in c["top"]), *e["gold"]])  # as the table shows them
    blocks.append(
        Bullets(
            [Item(f"`{doc}`: {_data(e['texts'].get(doc, '')) or '(no text)'}") for doc in shown],
            lead=f"The sessions (their first {SNIPPET} characters):",
        )
    )
    return Section(
        anchor(e["question_id"]),
        f"{e['question_id']} ({e['question_type']})",
        blocks,
        level=3,
        category=e["question_type"],
    )


def explanations_sections(report: Report) -> list[Section]:
    """The report's explanations: the pairs a build moved, then the worst pairs, each once."""
    block = report.get("explanations")
    if not block or not block["questions"]:
        return []
    questions = block["questions"]
    shown = [q for q in dict.fromkeys(block["moved"] + block["worst"]) if q in questions]
    which = " and ".join(
        part
        for part in (
            f"the {len(block['moved'])} pairs a build moved" if block["moved"] else "",
            f"the {len(block['worst'])} worst pairs" if block["worst"] else "",
        )
        if part
    )
    intro = Paragraph(
        f"Why {which} ranked as they did: each build's top {TOP} side by side, each hit with its rank and score in vipune's semantic arm "
        f"and its BM25 arm (what vipune's own hybrid search fused, recorded by the lib lane) and its fused "
        f"score; each gold session outside the top {TOP} with its rank in each arm. The arms' RRF fusion is "
        "checked against each list; a list they do not explain is named. `vipune-eval explain QUESTION_ID` "
        "explains any pair."
    )
    return [
        Section("explanations", "Explanations", [intro]),
        *(explanation(questions[q], moved_lines(report, q)) for q in shown),
    ]


def moved_lines(report: Report, question_id: str) -> list[str]:
    """How each build moved a pair against the primary (its recall@k there and in the primary)."""
    out = []
    for b in report["builds"][1:]:
        for c in b["changes"]:
            if c["question_id"] == question_id:
                keys = [key for key in c if measures.cutoff(key) and key.startswith(f"{measures.PRIMARY}@")]
                values = [
                    f"{key} {c[key][1]:.2f} in {b['id']}, {c[key][0]:.2f} in the primary"
                    for key in sorted(keys, key=lambda key: measures.cutoff(key) or 0)
                ]
                out.append(f"moved by {b['id']}: " + "; ".join(values))
    return out


def unexplained(report: Report) -> list[str]:
    """The explained pairs whose arms do not explain their list (named with their build)."""
    block = report.get("explanations")
    found = [
        f"{q} on {c['build']}"
        for q, e in (block["questions"].items() if block else [])
        for c in e["builds"]
        if c["mismatch"]
    ]
    if not found:
        return []
    return [
        f"the arms of vipune's hybrid search do not explain {len(found)} explained list"
        f"{'s' if len(found) != 1 else ''} ({', '.join(found[:10])}{' …' if len(found) > 10 else ''}): "
        "report.md, Explanations, says where each differs"
    ]
