"""What a finished run prints last (results/summary.txt): the headline table, each build's
difference in a line, the warnings that change the reading, and where the files are. About 30
lines a person reads in a terminal; every number is in report.json, every table in report.md.
The HTML report's first page shows the same pieces (stages.report.html)."""

from __future__ import annotations

from typing import Any, Mapping

from vipune_eval.core import paths
from vipune_eval.registry import measures
from vipune_eval.registry.views import PRIMARY
from vipune_eval.registry.vipune_runs import BINARY
from vipune_eval.stages.report.markdown import NO_INTERVAL, NO_INTERVAL_NOTE, _cell

# Where a run's files are: (path, what it holds), in the order a person opens them.
FILES = ((paths.REPORT_MD, "every table: per category, dev/test, comparisons, diagnostics"),
         (paths.REPORT_HTML, "the HTML report: these numbers first, then every table with its plot"),
         (paths.REPORT_JSON, "every number, interval and the provenance, for scripts"))
MISMATCH_SHOWN = 0.05  # a vipune run and its mirror differing on more pairs than this is a warning


def headline(report: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The headline table: each retriever (vipune first) with its pairs and recall@k, k of the
    primary view, with intervals: (column names, rows of cells)."""
    ks = report["views"][PRIMARY.name]["ks"]
    keys = [measures.key(measures.PRIMARY, k) for k in ks]
    rows = []
    for name in report["retriever_order"]:
        entry = report["retrievers"][name]
        failed = f" ({len(entry['failed'])} failed)" if entry.get("failed") else ""
        rows.append([name, f"{entry['pairs']}{failed}",
                     *(_cell(entry["metrics"][key], entry["intervals"][key]) for key in keys)])
    return ["retriever", "pairs", *keys], rows


def build_lines(report: Mapping[str, Any]) -> list[str]:
    """One line per vipune build but the primary: its difference from the primary on recall@k
    (the primary k) with its interval and Holm-adjusted p, and how many pairs changed."""
    builds = report["builds"]
    if len(builds) < 2:
        return []
    key = measures.key(measures.PRIMARY, measures.primary_k(report["views"][PRIMARY.name]["ks"]))
    lines = []
    for b in builds[1:]:
        r = b["comparison"]["overall"][key]
        lo, hi = r["interval"]
        verdict = "a real difference" if r["significant"] else "no significant difference"
        lines.append(f"{b['id']} ({b.get('source') or 'evaluated before'}): {key} {r['a']:.3f} vs "
                     f"{r['b']:.3f} ({100 * r['difference']:+.1f} points, 95% CI {100 * lo:+.1f} to "
                     f"{100 * hi:+.1f}, p_holm = {r['p_holm']:.3f}: {verdict}); "
                     f"{len(b['changes'])} pairs gained or lost gold sessions")
    return lines


def warnings(report: Mapping[str, Any]) -> list[str]:
    """What changes the reading of the numbers: builds that fail their preflight, failed pairs,
    truncated gold sessions, a vipune run that no longer agrees with its mirror, too few pairs."""
    out = []
    for b in report["builds"]:
        if b.get("failed_checks"):
            out.append(f"{b['id']} fails its preflight ({', '.join(b['failed_checks'])}): its search does "
                       "not do what the contract says (vipune.preflight: record evaluated it anyway)")
    for name in report["retriever_order"]:
        failed = report["retrievers"][name].get("failed")
        if failed:
            out.append(f"{name}: {len(failed)} pairs failed and are left out of every average "
                       "(vipune.on_error: record; report.json lists why)")
    d = report["diagnostics"]
    t = d["truncation"]
    if t["pairs_with_truncated_gold"]:
        out.append(f"{t['truncated_share']:.1%} of the session texts are over 512 tokens and were embedded "
                   f"truncated; {t['pairs_with_truncated_gold']} pairs have a truncated gold session "
                   "(report.md, Diagnostics)")
    k = measures.primary_k(report["views"][PRIMARY.name]["ks"])
    for key in ("vipune_vs_hybrid", "vipune_semantic_vs_dense"):
        agree = d.get(key)
        if agree and 1 - agree[f"same_top{k}_share"] > MISMATCH_SHOWN:
            binary = BINARY.hybrid if key == "vipune_vs_hybrid" else BINARY.semantic
            out.append(f"{binary} and its mirror {agree['mirror']} rank the top {k} differently on "
                       f"{1 - agree[f'same_top{k}_share']:.0%} of {agree['pairs']} pairs: the binary no longer "
                       "does what its contract says, or the mirror's setting differs")
    for agree in d.get("lanes", []):
        differ = agree[f"differ_top{max(report['views'][PRIMARY.name]['ks'])}"]
        if differ:
            out.append(f"{agree['run']} (vipune's code, cached vectors) and {agree['mirror']} (the binary) rank "
                       f"{len(differ)} of {agree['pairs']} pairs differently: {', '.join(differ[:5])}"
                       + (" …" if len(differ) > 5 else "") + " (report.md, Diagnostics)")
    if any(NO_INTERVAL in cell for row in headline(report)[1] for cell in row):
        out.append(NO_INTERVAL_NOTE.replace("`", ""))
    return out


def _aligned(columns: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return [line(columns), *(line(r) for r in rows)]


def render(report: Mapping[str, Any]) -> str:
    """The summary as plain text."""
    lines = [f"vipune-eval: {report['pairs']} pairs scored; {report['protocol']}.",
             "recall@k: the share of a pair's gold sessions among the first k results; brackets: 95% intervals.",
             "", *_aligned(*headline(report))]
    builds = build_lines(report)
    if builds:
        lines += ["", f"vipune builds against {report['builds'][0]['id']} "
                      f"({report['builds'][0].get('source') or 'vipune.binary'}):", *(f"  {b}" for b in builds)]
    warned = warnings(report)
    if warned:
        lines += ["", "warnings:", *(f"  ! {w}" for w in warned)]
    lines += ["", "files:", *(f"  {path:<22} {what}" for path, what in FILES)]
    return "\n".join(lines) + "\n"
