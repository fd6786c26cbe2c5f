"""vipune's lanes set against what they must rank as: the binary's runs against their reference
mirrors (`vipune` against `hybrid`, `vipune-semantic` against `dense`), and vipune's own search
code through vipune-lane against the binary, in the diagnostics and, where they disagree, in the
warnings."""

from __future__ import annotations

from vipune_eval.registry import measures
from vipune_eval.stages.report import lanes
from vipune_eval.stages.report.document import Item
from vipune_eval.stages.report.report_json import Report, primary_ks

MISMATCH_SHOWN = 0.05  # a vipune run and its mirror differing on more pairs than this is a warning


def items(report: Report, ks: list[int]) -> list[Item]:
    """The diagnostics' bullets: each lane's agreement with its mirror, then each lib lane's with
    the binary, on the top k of every k."""
    d = report["diagnostics"]
    out = []
    for lane in lanes.LANES:
        agree = d.get(lane.agreement) if lane.agreement else None
        if agree:
            shares = ", ".join(f"top {kk}: {agree[f'same_top{kk}_share']:.1%}" for kk in ks)
            out.append(Item(f"{lane.retriever} and its mirror `{agree['mirror']}` return the same ranking on "
                            f"{shares} of {agree['pairs']} pairs. A large disagreement means the binary no longer "
                            "does what its contract says."))
    for agree in d.get("lanes", []):
        shares = ", ".join(f"top {kk}: {agree[f'same_top{kk}_share']:.1%}" for kk in ks)
        differ = agree[f"differ_top{max(ks)}"]
        out.append(Item(f"{agree['run']} (vipune's own search code through vipune-lane, on the cached query "
                        f"vectors) and {agree['mirror']} (the binary, with its model) return the same ranking on "
                        f"{shares} of {agree['pairs']} pairs"
                        + (f"; they differ on {len(differ)}: {', '.join(differ)}." if differ else ".")))
    return out


def warnings(report: Report) -> list[str]:
    """A lane that no longer agrees with its mirror (on more than MISMATCH_SHOWN of the pairs), and
    every pair where a lib lane ranks otherwise than the binary."""
    d = report["diagnostics"]
    k = measures.primary_k(primary_ks(report))
    out = []
    for lane in lanes.LANES:
        agree = d.get(lane.agreement) if lane.agreement else None
        if agree and 1 - agree[f"same_top{k}_share"] > MISMATCH_SHOWN:
            out.append(f"{lane.retriever} and its mirror {agree['mirror']} rank the top {k} differently on "
                       f"{1 - agree[f'same_top{k}_share']:.0%} of {agree['pairs']} pairs: the binary no longer "
                       "does what its contract says, or the mirror's setting differs")
    for agree in d.get("lanes", []):
        differ = agree[f"differ_top{max(primary_ks(report))}"]
        if differ:
            out.append(f"{agree['run']} (vipune's code, cached vectors) and {agree['mirror']} (the binary) rank "
                       f"{len(differ)} of {agree['pairs']} pairs differently: {', '.join(differ[:5])}"
                       + (" …" if len(differ) > 5 else "") + " (report.md, Diagnostics)")
    return out
