"""The vipune builds a run evaluates (vipune.compare): their table (each build's numbers, where it
came from, a failed preflight, its latency), each build's vipune-lane (where its search code came
from, a fast build, the copies its source changes), each build's difference from the primary in a
line, and the pairs that gained or lost gold sessions."""

from __future__ import annotations

from vipune_eval.stages.report.document import Bullets, Item, Section, Table, cell
from vipune_eval.stages.report.report_json import BuildEntry, Report, primary_key, primary_ks, recall_keys
from vipune_eval.stages.report.sections.orders import table_keys
from vipune_eval.stages.report.sections.provenance import changed_copies, lane_source, lane_words
from vipune_eval.stages.report.sections.tables import noted


def failed_preflight(build: BuildEntry) -> str:
    """What a build's failed preflight is, in words: the drift each failed check is, where the
    preflight knows it, else the check's name (one owner: the builds table and the warnings)."""
    return "fails preflight: " + "; ".join(build.get("drift") or build["failed_checks"])


SHOWN_CHANGES = 10  # the changed pairs a terminal shows per build (report.md lists 20, report.json all)


def came_from(build: BuildEntry) -> str:
    """Where a build came from, for its line: the config entry and the file it named, then its
    vipune-lane's source (a checkout with its git description, a fast build) and how many of the
    vipune-lane's copies that source changes (each is a warning)."""
    source = build.get("source") or "evaluated before"
    lane = build.get("lane")
    if not lane:
        return source
    changed = len(changed_copies(lane))
    return f"{source}; its vipune-lane: {lane_source(lane)}" + (
        f"; {changed} cop{'ies' if changed > 1 else 'y'} its source changes" if changed else ""
    )


def build_lines(report: Report) -> list[str]:
    """One line per vipune build but the primary, before → after (that build → the primary: a
    release → your checkout): recall@k (the primary k) of the run they are compared by, the
    difference with its interval (unadjusted, said so) and Holm-adjusted p, and how many pairs
    changed; then the first of those pairs, each with its recall@k before → after (at the primary
    k, else the first k where it changed)."""
    builds = report["builds"]
    if len(builds) < 2:
        return []
    key = primary_key(report)
    on = report.get("builds_compared_on") or "vipune"
    lines = []
    for b in builds[1:]:
        r = b["comparison"]["overall"][key]
        lo, hi = r["interval"]
        verdict = "a real difference" if r["significant"] else "no significant difference"
        lines.append(
            f"{b['id']} ({came_from(b)}): {on} {key} {r['b']:.3f} → "
            f"{r['a']:.3f} in {builds[0]['id']} ({100 * r['difference']:+.1f} points, unadjusted 95% CI "
            f"{100 * lo:+.1f} to {100 * hi:+.1f}, p_holm = {r['p_holm']:.3f}: {verdict}); "
            f"{len(b['changes'])} pairs gained or lost gold sessions"
        )
        for c in b["changes"][:SHOWN_CHANGES]:
            shown = key if key in c else next(k for k in recall_keys(report) if k in c)
            before, after = c[shown]
            lines.append(f"  {c['question_id']} ({c['question_type']}): {shown} {before:.2f} → {after:.2f}")
        if len(b["changes"]) > SHOWN_CHANGES:
            lines.append(f"  … {len(b['changes']) - SHOWN_CHANGES} more pairs in report.md")
    return lines


def builds_section(report: Report) -> list[Section]:
    builds = report["builds"]
    if not builds:
        return []
    keys = table_keys(report)
    rows = []
    for i, b in enumerate(builds):
        label = f"{b['id']} (primary)" if i == 0 else b["id"]
        if b.get("failed_checks"):
            label += " — " + failed_preflight(b)
        if report.get("baseline") and report["baseline"]["id"] == b["id"]:
            label += " (vipune baseline)"
        seconds = b.get("search_seconds")
        latency = f"{seconds['p50']:.3f} / {seconds['p95']:.3f}" if seconds else "–"
        rows.append(
            [
                label,
                b["version"],
                b["sha256"][:12],
                b.get("source") or "–",
                str(b["pairs"]),
                *(cell(b["metrics"][key], b["intervals"][key]) for key in keys),
                latency,
            ]
        )
    columns = ["build", "version", "sha256", "from", "pairs", *keys, "latency p50 / p95 (s)"]
    blocks = noted(Table(columns, rows, numeric=[False] * 4 + [True] * (len(keys) + 2)))
    built = [(b["id"], lane) for b in builds if (lane := b.get("lane"))]
    if built:
        blocks.append(
            Bullets(
                [
                    Item(
                        f"{build}: {lane_words(lane)}",
                        [f"copies {c}: its vipune-lib numbers do not follow that edit" for c in changed_copies(lane)],
                    )
                    for build, lane in built
                ],
                lead="**Each build's vipune-lane** (vipune-lib's code)",
            )
        )
    top = max(primary_ks(report))
    for b in builds[1:]:
        changes = [
            f"{c['question_id']} ({c['question_type']}): "
            # a change holds gained@k / lost@k and the primary measure's key at each k that
            # changed, as [this build's, the primary's]: before → after
            + ", ".join(f"{key} {c[key][0]:.2f} → {c[key][1]:.2f}" for key in keys if key in c)
            for c in b["changes"][:20]
        ]
        blocks.append(
            Bullets(
                [
                    *map(Item, b["comparison"]["summary"]),
                    Item(f"{len(b['changes'])} pairs gained or lost gold sessions in the top {top}", changes),
                ],
                lead=f"**{b['id']} → {builds[0]['id']}** (before → after; {b['comparison']['correction']})",
            )
        )
    return [Section("builds", "vipune builds", blocks)]
