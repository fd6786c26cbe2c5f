"""vipune's lanes set against what they must rank as: the binary's runs against their reference
mirrors (`vipune` against `hybrid`, `vipune-semantic` against `dense`), and vipune's own search
code through vipune-lane against the binary in every view (the same rankings, on the same pairs),
in the diagnostics and, where they disagree, in the warnings."""

from __future__ import annotations

from vipune_eval.registry import lanes
from vipune_eval.registry.views import PRIMARY
from vipune_eval.stages.report.document import Item
from vipune_eval.stages.report.report_json import (
    LaneAgreement,
    Report,
    differ_top,
    mirror_agreement,
    primary_k,
    primary_ks,
    same_top_share,
)
from vipune_eval.stages.report.sections.orders import and_listed, in_view, view_order
from vipune_eval.stages.report.sections.provenance import stale_items

MISMATCH_SHOWN = 0.05  # a vipune run and its mirror differing on more pairs than this is a warning


def mirrored() -> list[tuple[str, str]]:
    """(run, its diagnostics key) of each lane's run set against its reference mirror."""
    return [(run, key) for lane in lanes.LANES for run, key in lane.agreement_keys().items()]


def _by_view(report: Report) -> list[LaneAgreement]:
    """The lib lanes' agreements with the binary, view by view (the primary first)."""
    agreements = report["diagnostics"].get("lanes") or []
    rank = {name: i for i, name in enumerate(view_order(report))} if agreements else {}
    return sorted(agreements, key=lambda agree: rank.get(agree.get("view", PRIMARY.name), len(rank)))


def pairs_apart(agree: LaneAgreement) -> str | None:
    """Which pairs one lane scored and the other did not, every one named (None: the same pairs)."""
    run, mirror = agree["run"], agree["mirror"]
    only = [
        f"{', '.join(qids)} only in {name}"
        for qids, name in ((agree.get("only_run", []), run), (agree.get("only_mirror", []), mirror))
        if qids
    ]
    if not only:
        return None
    return f"{mirror} scored {agree['mirror_pairs']} pairs, {run} {agree['run_pairs']}: {'; '.join(only)}"


def _shares(agree: LaneAgreement, ks: list[int]) -> str:
    """The share of the pairs both scored whose top k is the same, at each k (``top 5: 87.5%``)."""
    shares = {k: same_top_share(agree, k) for k in ks}
    return ", ".join(f"top {k}: {'no pair' if s is None else f'{s:.1%}'}" for k, s in shares.items())


def items(report: Report) -> list[Item]:
    """The diagnostics' bullets: each lane's agreement with its mirror, then each lib lane's with
    the binary, on the top k of every k in the primary view, on the largest k in every other view;
    and the pairs one of them scored and the other did not."""
    d, ks = report["diagnostics"], primary_ks(report)
    out = []
    for run, key in mirrored():
        agree = mirror_agreement(d, key)
        if agree:
            out.append(
                Item(
                    f"{run} and its mirror `{agree['mirror']}` return the same ranking on "
                    f"{_shares(agree, ks)} of {agree['pairs']} pairs. A large disagreement means the binary no "
                    "longer does what its contract says."
                )
            )
    agreeing: list[LaneAgreement] = []  # in the other views: the same top k on the same pairs
    for agree in _by_view(report):
        view = agree.get("view", PRIMARY.name)
        pairs = pairs_apart(agree)
        top = max(report["views"][view]["ks"])  # the largest k of its view
        differ = differ_top(agree, top)
        if view == PRIMARY.name:
            text = (
                f"{agree['run']} (vipune's own search code through vipune-lane, on the cached query "
                f"vectors) and {agree['mirror']} (the binary, with its model) return the same ranking on "
                f"{_shares(agree, ks)} of {agree['pairs']} pairs"
            )
        else:
            share = same_top_share(agree, top)
            if share == 1.0 and not pairs:
                agreeing.append(agree)
                continue
            text = f"{view} view: {agree['run']} and {agree['mirror']} return the same top {top} on " + (
                "no pair" if share is None else f"{share:.1%} of {agree['pairs']} pairs"
            )
        text += f"; they differ on {len(differ)}: {', '.join(differ)}." if differ else "."
        out.append(Item(text + (f" {pairs}." if pairs else "")))
    views: dict[tuple[str, str], list[str]] = {}  # (run, mirror) → the other views where they agree
    for agree in agreeing:
        views.setdefault((agree["run"], agree["mirror"]), []).append(agree["view"])
    together: dict[tuple[str, ...], list[tuple[str, str]]] = {}  # those views → the lanes that agree in them
    for lane, where in views.items():
        together.setdefault(tuple(where), []).append(lane)
    for in_views, pairs_of_runs in together.items():
        runs, mirrors = (and_listed([lane[i] for lane in pairs_of_runs]) for i in (0, 1))
        out.append(
            Item(
                f"{runs} return{'s' if len(pairs_of_runs) == 1 else ''} the same ranking as {mirrors} on every pair of the {and_listed(list(in_views))} "
                f"view{'s' if len(in_views) > 1 else ''} (to the largest k of each)."
            )
        )
    return out


def why_apart(report: Report) -> str:
    """Why vipune-lib ranks otherwise than the binary, where the harness can tell, and what it means
    for each lane: a copy in the vipune-lane that this source changes (the binary runs the edit,
    vipune-lib does not), the binary's query vectors no longer the cached ones (its preflight's
    query parity failed: the binary measures its new query embedding, vipune-lib the cached
    vectors), a preflight check the binary now fails; else that the harness cannot tell."""
    prov = report["provenance"]
    stale = stale_items(prov["lane"])
    checks = [c for c in (prov.get("preflight") or {}).get("checks") or [] if not c.get("passed")]
    query = [c for c in checks if c["check"] == "query_embedding_parity"]
    others = [c.get("drift") or c["check"] for c in checks if c["check"] != "query_embedding_parity"]
    why = []
    if stale:
        why.append(
            f"vipune-lib does not run this source's {and_listed(stale)} (a stale copy: the binary's lists "
            "follow that edit, vipune-lib's do not)"
        )
    if query:
        why.append(
            f"the binary's query vectors are no longer the cached ones (its preflight's "
            f"query_embedding_parity: {query[0]['seen']}): the binary ranks with its new query embedding, "
            "vipune-lib with the cached vectors"
        )
    if others:
        why.append(f"the binary fails its preflight's {and_listed(others)} (vipune.preflight: record)")
    if why:
        return "why: " + "; ".join(why)
    return (
        "the harness cannot tell why (no copy in vipune-lib is stale"
        + (", the binary's query vectors are the cached ones" if prov.get("preflight") else "")
        + "): an edit outside the path vipune-lib compiles or pins, or a fault of the harness; "
        "`vipune-eval explain QUESTION` shows both lists"
    )


def disagreements(report: Report) -> list[str]:
    """Every way a lane and its mirror disagree: what they rank differently, then the pairs one of
    them scored and the other did not (their averages are over different pairs)."""
    return ranked_differently(report) + scored_apart(report)


def ranked_differently(report: Report) -> list[str]:
    """A lane that no longer agrees with its mirror (on more than MISMATCH_SHOWN of the pairs);
    in every view, the pairs a lib lane ranks otherwise than the binary (the gate's notes)."""
    d = report["diagnostics"]
    k = primary_k(report)
    out = []
    for run, key in mirrored():
        agree = mirror_agreement(d, key)
        share = same_top_share(agree, k) if agree else None  # None: no pair both scored, none compared
        if agree and share is not None and 1 - share > MISMATCH_SHOWN:
            out.append(
                f"{run} and its mirror {agree['mirror']} rank the top {k} differently on "
                f"{1 - share:.0%} of {agree['pairs']} pairs: the binary no longer "
                "does what its contract says, or the mirror's setting differs"
            )
    for agree in _by_view(report):
        view = agree.get("view", PRIMARY.name)
        differ = differ_top(agree, max(report["views"][view]["ks"]))
        if differ:
            out.append(
                f"{agree['run']} (vipune's code, cached vectors) and {agree['mirror']} (the binary) rank "
                f"{len(differ)} of {agree['pairs']} pairs differently{in_view(report, view)}: "
                f"{', '.join(differ[:5])}"
                + (" …" if len(differ) > 5 else "")
                + " (report.md, Diagnostics); "
                + why_apart(report)
            )
    return out


def scored_apart(report: Report) -> list[str]:
    """In every view, the pairs one of a lane and its mirror scored and the other did not, said
    once for the lanes and views that have the same ones."""
    apart: dict[
        tuple[str, tuple[str, ...], tuple[str, ...]], list[LaneAgreement]
    ] = {}  # the same pairs apart in a view → the lanes that have them
    for agree in _by_view(report):
        if agree.get("only_run") or agree.get("only_mirror"):
            view = agree.get("view", PRIMARY.name)
            apart.setdefault((view, tuple(agree["only_run"]), tuple(agree["only_mirror"])), []).append(agree)
    views: dict[
        tuple[str, str, tuple[int, int], tuple[str, ...], tuple[str, ...]], list[str]
    ] = {}  # the same lanes with the same pairs apart → the views where they are
    for (view, only_run, only_mirror), agreements in apart.items():
        runs, mirrors = and_listed([a["run"] for a in agreements]), and_listed([a["mirror"] for a in agreements])
        counts = (agreements[0]["mirror_pairs"], agreements[0]["run_pairs"])
        views.setdefault((runs, mirrors, counts, only_run, only_mirror), []).append(view)
    out = []
    for (runs, mirrors, (mirror_pairs, run_pairs), only_run, only_mirror), where in views.items():
        only = [
            f"{', '.join(qids)} only in {names}" for qids, names in ((only_run, runs), (only_mirror, mirrors)) if qids
        ]
        out.append(
            f"{mirrors} scored {mirror_pairs} pairs, {runs} {run_pairs}{in_view(report, *where)}: {'; '.join(only)} "
            "(their averages are over different pairs)"
        )
    return out
