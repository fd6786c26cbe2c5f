"""The what-if lab's section: each variant of the base retriever on the selection and the
confirmation split, its difference from the base with its interval and Holm-adjusted p, and the
verdict in words (``verdict``; stages.report.whatif chooses and confirms)."""

from __future__ import annotations

from vipune_eval.stages.report.document import Bullets, Item, Paragraph, Section, Table
from vipune_eval.stages.report.report_json import Report, WhatIf
from vipune_eval.stages.report.sections.tables import opt


def whatif_section(report: Report) -> list[Section]:
    block = report.get("whatif")
    if not block:
        return []
    sel, conf = block["select_on"], block["confirm_on"]
    base = block["base"]
    rows = [[f"base `{base['name']}`", opt(base[sel]), opt(base[conf]), "", "", "", "", ""]]
    for r in sorted(block["variants"], key=lambda r: -(v if (v := r[sel]) is not None else -1.0)):
        note = "chosen" if r["name"] == block["chosen"] else ""
        if r["params"] == base["params"]:
            note = (note + ", " if note else "") + "base setting"
        interval = "–" if r["interval"] is None else f"[{100 * r['interval'][0]:+.1f}, {100 * r['interval'][1]:+.1f}]"
        delta = "–" if r["test_delta"] is None else f"{100 * r['test_delta']:+.1f}"
        rows.append(
            [r["name"], opt(r[sel]), opt(r[conf]), delta, interval, f"{r['p']:.3f}", f"{r['p_holm']:.3f}", note]
        )
    table = Table(
        ["variant", sel, conf, f"{conf} − base", "95% interval (unadjusted)", "p", "p_holm", ""],
        rows,
        numeric=[False, True, True, True, False, True, True, False],
    )
    return [
        Section(
            "whatif",
            f"What-if lab: variants of `{base['name']}`, {block['measure']} chosen on {sel}, confirmed on {conf}",
            [
                Bullets(list(map(Item, verdict(block)))),
                table,
                Paragraph(
                    f"Sorted by {sel}. Differences and intervals in points ({block['measure']} × 100) "
                    f"on the {conf} pairs; p: paired randomisation (sign-flip) test against the base; "
                    f"p_holm: Holm over the {block['tried']} variants. Runs: results/runs/<variant>.run."
                ),
            ],
        )
    ]


def verdict(block: WhatIf) -> list[str]:
    """Plain sentences: what was chosen, whether the other split confirms it, and how many were tried."""
    measure, sel, conf = block["measure"], block["select_on"], block["confirm_on"]
    rows = {r["name"]: r for r in block["variants"]}
    chosen = None if block["chosen"] is None else rows.get(block["chosen"])
    base = block["base"]
    if not rows:
        return ["No variant was scored."]
    out = [
        f"{block['tried']} variants of `{base['name']}` tried; {measure} chosen on {sel} "
        f"({base['pairs'][sel]} pairs), confirmed on {conf} ({base['pairs'][conf]} pairs); "
        f"{block['correction']}."
    ]
    if chosen is None:  # analyse chooses on any pairs there are
        out.append(
            f"There are no pairs on the {sel} split: nothing can be chosen (set split.dev_fraction "
            f"so that the {sel} split holds pairs, or evaluate more pairs)."
        )
        return out
    if not base["pairs"][conf]:
        out.append(
            f"Chosen on {sel}: `{chosen['name']}` ({sel} {chosen[sel]:.3f} vs base {base[sel]:.3f}); "
            f"no pairs on the {conf} split: nothing can be confirmed."
        )
        return out
    if block["chosen_is_base_setting"]:
        out.append(f"Chosen on {sel}: `{chosen['name']}`, the base's own setting — no change is suggested.")
    else:
        delta = chosen["test_delta"]
        shown = "–" if delta is None else f"{100 * delta:+.1f} points, p_holm = {chosen['p_holm']:.3f}"
        state = (
            "confirmed"
            if block["confirmed"]
            else f"not confirmed (no significant gain after Holm over {block['tried']} variants)"
        )
        out.append(
            f"Chosen on {sel}: `{chosen['name']}` ({sel} {chosen[sel]:.3f} vs base "
            f"{base[sel]:.3f}); on {conf} against the base: {shown} — {state}."
        )
    best = block.get("best_on_test") if conf == "test" else block.get("best_on_dev")
    if best and best != block["chosen"]:
        out.append(
            f"`{best}` scores best on {conf} but was not chosen on {sel}: it is not the winner "
            f"(picking by the {conf} score is the lucky pick the split guards against)."
        )
    return out
