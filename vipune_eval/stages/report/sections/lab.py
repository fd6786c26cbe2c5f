"""The what-if lab's section: each variant of the base retriever on the selection and the
confirmation split, its difference from the base with its interval and Holm-adjusted p, and the
verdict (stages.report.whatif words it)."""

from __future__ import annotations

from vipune_eval.stages.report import whatif
from vipune_eval.stages.report.document import Bullets, Item, Paragraph, Section, Table
from vipune_eval.stages.report.report_json import Report
from vipune_eval.stages.report.sections.tables import opt


def whatif_section(report: Report) -> list[Section]:
    block = report.get("whatif")
    if not block:
        return []
    sel, conf = block["select_on"], block["confirm_on"]
    base = block["base"]
    rows = [[f"base `{base['name']}`", opt(base[sel]), opt(base[conf]), "", "", "", "", ""]]
    for r in sorted(block["variants"], key=lambda r: -(r[sel] if r[sel] is not None else -1.0)):
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
                Bullets(list(map(Item, whatif.verdict(block)))),
                table,
                Paragraph(
                    f"Sorted by {sel}. Differences and intervals in points ({block['measure']} × 100) "
                    f"on the {conf} pairs; p: paired randomisation (sign-flip) test against the base; "
                    f"p_holm: Holm over the {block['tried']} variants. Runs: results/runs/<variant>.run."
                ),
            ],
        )
    ]
