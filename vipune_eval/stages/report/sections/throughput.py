"""The report's "Embed throughput": what the embed jobs computed and how fast, per provider, what
each guarantees about the vectors' bytes, and what its rate projects for LongMemEval_M
(stages.embed.projection computes it)."""

from __future__ import annotations

from vipune_eval.stages.report.document import Block, Bullets, Item, Paragraph, Section
from vipune_eval.stages.report.report_json import Report
from vipune_eval.stages.report.sections.orders import by_granularity


def embed_section(report: Report) -> Section:
    """The report's "Embed throughput" section."""
    embed = report["embed"]
    blocks: list[Block] = [Paragraph(f"{embed['definition']}.")]
    if not embed["providers"]:
        return Section(
            "embed",
            "Embed throughput",
            blocks
            + [Bullets([Item(f"{embed.get('why')}; the embed jobs' own time, summed: {embed['job_seconds']:.1f} s.")])],
        )
    items = [
        Item(
            f"{embed['texts']} texts ({embed['tokens']} tokens) in {embed['seconds']:.1f} s of model calls by "
            f"{embed['jobs']} job(s); the embed jobs' own time, summed: {embed['job_seconds']:.1f} s, of it "
            f"{embed['load_seconds']:.1f} s loading the model; the rest is counting tokens, reading texts and "
            "waiting on texts other jobs had claimed"
        )
    ]
    for p in embed["providers"]:
        gflops, per_s = p.get("useful_gflops_per_s"), p.get("texts_per_s")
        rate = f", {gflops:.0f} useful GFLOP/s" if gflops is not None else ""
        speed = f"{per_s:.1f} texts/s{rate}" if per_s is not None else "no rate"
        budgets = "/".join(map(str, p["batch_tokens"])) or "not recorded"
        sub = [f"vectors: {p['reproducibility']}"]
        projection = p["projection"]
        if projection is None:
            sub.append(f"no projection: {p.get('why')}")
        else:
            shown = projection["minutes"]
            minutes = ", ".join(f"{g} rows {shown[g]:.{1 if shown[g] < 10 else 0}f} min" for g in by_granularity(shown))
            session = projection["workload"].get("session")
            theirs = (
                f"; LongMemEval_M's session texts average {session['tokens'] / session['texts']:.0f}" if session else ""
            )
            sub += [
                f"projected: {projection['what']}: {minutes}",
                f"what this projection rests on: this run's texts (mean {p['tokens'] / p['texts']:.0f} "
                f"tokens{theirs}; on short texts each model call's overhead weighs more, so the rate "
                "is lower) and this machine's load while the embed jobs ran. The README's figure "
                "(docs/performance.md) was measured on a calm 2-core machine on texts of LongMemEval_M's "
                "lengths: plan a LongMemEval_M run with that one; this one holds only for texts of "
                "M's lengths on a machine as loaded as this one was.",
            ]
        items.append(
            Item(
                f"**{p['provider'].upper()}** ({p['device']}): {p['texts']} texts by {p['jobs']} job(s) of "
                f"{'/'.join(map(str, p['threads']))} thread(s), batches of at most {budgets} tokens: {speed}",
                sub,
            )
        )
    return Section("embed", "Embed throughput", blocks + [Bullets(items)])
