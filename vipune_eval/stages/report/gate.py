"""gate: a finished comparison of vipune builds (vipune.compare) as a decision a CI can act on.

Before → after is the baseline (the build compared: a release) → vipune.binary (the checkout). The
exit status: 0 when no primary measure (recall@k at every configured k, overall and in each
category, on the run the builds are compared by) is worse than the baseline by more than
``gate.margin`` with a Holm-adjusted p below ``gate.alpha``; 1 when one is (each named with its
difference, interval and p, and the pairs that lost most); 2 when the run cannot be judged (no
comparison, failed pairs, other pair sets, a baseline searched with other data, vectors or
settings, a lane that does not run part of the checkout), naming why. It writes ``gate.md`` (a
pull-request comment: the verdict first, then the table and the moved pairs, each linked to its
explanation in the HTML report) and ``gate.xml`` (JUnit: one test case per measure and category)
into the run's folder, and reads only what the run wrote. The statistics are
stages.report.compare's (paired tests, bootstrap intervals, Holm), over this family alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from vipune_eval.core import paths
from vipune_eval.core.io import read_json, write_text
from vipune_eval.core.report_inputs import under
from vipune_eval.registry.lanes import LIB
from vipune_eval.stages.report.compare import compare_scored
from vipune_eval.stages.report.report_json import BuildEntry, Compared, Report, recall_keys
from vipune_eval.stages.report.sections import agreement
from vipune_eval.stages.report.sections.orders import and_listed, first_named
from vipune_eval.stages.report.sections.provenance import stale_copies, stale_items
from vipune_eval.stages.report.sections.vipune_builds import failed_preflight
from vipune_eval.stages.report.sections.warnings import failure_reason

PASS, FAIL, CANNOT = 0, 1, 2
WORDS = {PASS: "pass", FAIL: "fail", CANNOT: "cannot judge"}
MOVED_SHOWN = 30  # gate.md lists this many moved pairs (report.md and `vipune-eval explain` have them all)
LOST_SHOWN = 5  # the verdict names this many of the pairs that lost most
NAMED = 5  # a reason names this many pairs


class CannotJudge(Exception):
    """The run cannot be judged: why, in words."""


@dataclass
class MeasureChange:
    """One measure in one group of pairs (all of them, or a category), before → after: its paired
    comparison (a: the checkout, after; b: the baseline, before; the difference after − before)."""

    measure: str
    category: str | None
    compared: Compared
    failing: bool

    @property
    def label(self) -> str:
        return f"{self.measure} ({self.category or 'all pairs'}, {self.compared['pairs']} pairs)"

    def words(self) -> str:
        d = self.compared
        lo, hi = d["interval"]
        return (
            f"{self.label}: {d['b']:.3f} → {d['a']:.3f} ({100 * d['difference']:+.1f} points, 95% CI "
            f"{100 * lo:+.1f} to {100 * hi:+.1f}, p_holm = {d['p_holm']:.3g})"
        )


@dataclass
class Verdict:
    code: int
    headline: str
    reasons: list[str] = field(default_factory=list)
    setting: str = ""  # what was judged against what, and by which rule
    rows: list[MeasureChange] = field(default_factory=list)
    moved: list[dict[str, Any]] = field(default_factory=list)  # report.json's changes: before → after
    notes: list[str] = field(default_factory=list)  # what else changes the reading (the report's words)
    suite: str = "vipune-eval gate"


def _read(run: Path, path: str, what: str) -> Any:
    file = under(run, path)
    if not file.is_file():
        raise CannotJudge(f"{file} is not there ({what}): not a finished run of the workflow; run it first")
    return read_json(file)


def _baseline(report: Report) -> BuildEntry:
    builds = report.get("builds") or []
    if len(builds) < 2:
        raise CannotJudge(
            "no comparison: the run evaluates no build but vipune.binary (vipune.compare names none), "
            "so there is no baseline to judge it against"
        )
    wanted = baseline.get("id") if (baseline := report.get("baseline")) else None
    if wanted:
        return next(b for b in builds if b["id"] == wanted)
    if len(builds) > 2:
        raise CannotJudge(
            f"{len(builds) - 1} builds are compared with vipune.binary "
            f"({', '.join(b['id'] for b in builds[1:])}): set vipune.baseline to the one to judge against"
        )
    return builds[1]


def _failed(build: BuildEntry, role: str, on: str) -> None:
    failed = build.get("failed") or {}
    if failed:
        qids = sorted(failed)
        raise CannotJudge(
            f"the {role} {build['id']} failed {len(qids)} pair{'s' if len(qids) > 1 else ''} on {on} "
            f"({failure_reason(failed[qids[0]])}: {first_named(qids, NAMED)}): its averages leave them out, so the "
            "two builds would be compared on other pairs; fix the failure, or judge a run without it"
        )


def _same_searches(after: dict[str, Any], before: dict[str, Any], baseline: str) -> None:
    """The baseline must have searched what the checkout searched: the same settings, and on
    every pair the same data (question, rows, texts, times) and vectors (the model's)."""
    mine, theirs = after.get("searched"), before.get("searched")
    if mine is None or theirs is None:
        which = "the baseline's" if theirs is None else "the checkout's"
        raise CannotJudge(
            f"{which} metrics record nothing of what its search was made from (scored by a "
            "vipune-eval older than the gate): run the workflow again, so that both are scored anew"
        )
    if mine["settings"] != theirs["settings"]:
        raise CannotJudge(
            f"a stale baseline: {baseline} was searched with other settings ({theirs['settings']}) "
            f"than the checkout ({mine['settings']}); run its search again (--forcerun)"
        )
    for index, what in (
        (0, "other data (the question, the haystack's sessions or their times: another dataset)"),
        (1, "other vectors (another model or embedding)"),
    ):
        differ = sorted(
            q for q in mine["personas"] if theirs["personas"].get(q, [None, None])[index] != mine["personas"][q][index]
        )
        if differ:
            raise CannotJudge(
                f"a stale baseline: {baseline} was searched with {what} on {len(differ)} of "
                f"{len(mine['personas'])} pairs ({first_named(differ, NAMED)}) than the checkout: the two are not "
                "comparable; search the baseline again on this run's data"
            )


def _runs_all_of_it(report: Report, on: str) -> None:
    """The lib lane runs vipune's compiled search code but stands in for the command's path and the
    query's embedding: a checkout that changes what it stands in for is not measured by it."""
    if on != LIB.hybrid:
        return
    stale = stale_items(report["provenance"]["lane"])
    if stale:
        raise CannotJudge(
            f"the builds are compared on {on}, which does not run this checkout's {and_listed(stale)} "
            "(a stale copy: the binary runs that edit, vipune-lib the code it copied), so its numbers "
            "do not measure the whole change; judge it on the binary (retrievers vipune and "
            "vipune-semantic, with vipune.preflight: record)"
        )


def _notes(report: Report) -> list[str]:
    """What else changes the reading, in the report's own words: stale copies, failed preflights,
    lanes that rank apart (with why)."""
    out = stale_copies(report)
    out += [f"{b['id']} {failed_preflight(b)}" for b in report["builds"] if b.get("failed_checks")]
    out += agreement.ranked_differently(report)
    return out


def judge(run: Path) -> Verdict:
    """The verdict on the finished run in the folder ``run`` (its results folder)."""
    try:
        return _judge(run)
    except CannotJudge as reason:
        return Verdict(CANNOT, "cannot judge this run", [str(reason)])


def _judge(run: Path) -> Verdict:
    report: Report = _read(run, paths.REPORT_JSON, "the report")
    baseline = _baseline(report)
    checkout = report["builds"][0]
    on = report.get("builds_compared_on") or "vipune"
    gate = _read(run, paths.CONFIG_JSON, "the run's config").get("gate")
    if not gate:
        raise CannotJudge(
            f"{under(run, paths.CONFIG_JSON)} has no gate settings (a run made before vipune-eval "
            "had the gate): run the workflow again"
        )
    margin, alpha = gate["margin"], gate["alpha"]
    _failed(checkout, "checkout", on)
    _failed(baseline, "baseline", on)
    manifest = _read(run, paths.REPORT_MANIFEST, "the report's inputs")
    view = manifest["views"][0]
    after = _read(run, view["metrics"][on], f"{on}'s metrics")
    before = _read(run, view["builds"][baseline["id"]], f"the baseline's {on} metrics")
    only_after = sorted(set(after["per_query"]) - set(before["per_query"]))
    only_before = sorted(set(before["per_query"]) - set(after["per_query"]))
    if only_after or only_before:
        raise CannotJudge(
            "the two builds scored different pairs ("
            + "; ".join(
                f"{len(q)} only in the {who}: {first_named(q, NAMED)}"
                for q, who in ((only_after, "checkout"), (only_before, "baseline"))
                if q
            )
            + "): a baseline made on another dataset or split; search it again on this run's data"
        )
    _same_searches(after, before, baseline["id"])
    _runs_all_of_it(report, on)

    keys = recall_keys(report)
    qids = sorted(after["per_query"])  # the baseline's: the same pairs (checked above)
    compared = compare_scored(after, before, keys, checkout["id"], baseline["id"], alpha)
    groups = [(None, compared["overall"]), *compared["per_category"].items()]
    rows = [
        MeasureChange(key, category, r, r["difference"] < -margin and r["p_holm"] < alpha)
        for category, results in groups
        for key, r in results.items()
    ]
    moved = baseline.get("changes") or []
    setting = (
        f"checkout {checkout['id']} ({checkout.get('source') or 'vipune.binary'}) against baseline "
        f"{baseline['id']} ({baseline.get('source') or 'evaluated before'}), on {on}, {len(qids)} pairs; "
        f"before → after is the baseline → the checkout. A measure fails when it is worse by more than "
        f"gate.margin = {margin:g} with a Holm-adjusted p below gate.alpha = {alpha:g} (Holm over the "
        f"{compared['comparisons']} comparisons below: {', '.join(keys)}, over all pairs and in each category)."
    )
    failing = [r for r in rows if r.failing]
    suite = f"vipune-eval gate: {on}, {baseline['id']} → {checkout['id']}"
    if failing:
        lost = lost_most(moved, keys)
        reasons = [f"worse: {r.words()}" for r in failing]
        if lost:
            reasons.append("the pairs that lost most: " + "; ".join(moved_words(c, keys) for c in lost))
        return Verdict(
            FAIL,
            f"{len(failing)} measure{'s' if len(failing) > 1 else ''} worse than the baseline",
            reasons,
            setting,
            rows,
            moved,
            _notes(report),
            suite,
        )
    headline = (
        "no measure worse than the baseline; no pair moved"
        if not moved
        else f"no measure worse than the baseline beyond the margin; {len(moved)} pair"
        f"{'s' if len(moved) > 1 else ''} moved"
    )
    return Verdict(PASS, headline, [], setting, rows, moved, _notes(report), suite)


def lost_most(moved: list[dict[str, Any]], keys: list[str]) -> list[dict[str, Any]]:
    """The moved pairs that lost most: the largest drop of recall summed over the cut-offs."""

    def loss(change: dict[str, Any]) -> float:
        total: float = sum(change[k][0] - change[k][1] for k in keys if k in change)
        return total

    return sorted((c for c in moved if loss(c) > 0), key=lambda c: (-loss(c), c["question_id"]))[:LOST_SHOWN]


def moved_words(change: dict[str, Any], keys: list[str]) -> str:
    """A moved pair, before → after at each cut-off where it moved: ``q7 (multi-session): recall@5
    1.00 → 0.50`` (``other gold sessions`` where as many were found, but not the same ones)."""

    def moved(k: str) -> str:
        before, after = change[k]
        return f"{k} {before:.2f} → {after:.2f}" + (" (other gold sessions)" if before == after else "")

    return f"{change['question_id']} ({change['question_type']}): " + ", ".join(moved(k) for k in keys if k in change)


def explanation_link(qid: str) -> str:
    """Where gate.md (beside report.json) links a question's explanation: its anchor in the HTML report."""
    page = os.path.relpath(paths.REPORT_PAGE, os.path.dirname(paths.GATE_MD))
    return f"{Path(page).as_posix()}#explain-{qid}"


def markdown(verdict: Verdict) -> str:
    """gate.md: a pull-request comment, the verdict first."""
    mark = {PASS: "✅", FAIL: "❌", CANNOT: "⚠️"}[verdict.code]
    lines = [
        f"## {mark} vipune-eval gate: {WORDS[verdict.code]} (exit {verdict.code})",
        "",
        f"**{verdict.headline[0].upper() + verdict.headline[1:]}.**",
        "",
    ]
    lines += [f"- {reason}" for reason in verdict.reasons]
    if verdict.reasons:
        lines.append("")
    if verdict.setting:
        lines += [verdict.setting, ""]
    if verdict.rows:
        lines += [
            "| measure | pairs | before | after | difference | 95% CI | p (Holm) | |",
            "|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in verdict.rows:
            d = r.compared
            lo, hi = d["interval"]
            lines.append(
                f"| {r.measure} ({r.category or 'all pairs'}) | {d['pairs']} | {d['b']:.3f} | {d['a']:.3f} | "
                f"{100 * d['difference']:+.1f} pts | {100 * lo:+.1f} to {100 * hi:+.1f} | {d['p_holm']:.3g} | "
                f"{'**worse**' if r.failing else 'ok'} |"
            )
        lines.append("")
    if verdict.code != CANNOT:
        keys = list(dict.fromkeys(r.measure for r in verdict.rows))
        if verdict.moved:
            lines += [
                f"### The pairs that moved ({len(verdict.moved)})",
                "",
                "Each links to its explanation in the HTML report (the run's `html/report-page.html`); "
                "`vipune-eval explain QUESTION_ID` prints it.",
                "",
            ]
            for c in verdict.moved[:MOVED_SHOWN]:
                qid = c["question_id"]
                lines.append(
                    f"- [{qid}]({explanation_link(qid)}){moved_words(c, keys).removeprefix(qid)} · "
                    f"`vipune-eval explain {qid}`"
                )
            if len(verdict.moved) > MOVED_SHOWN:
                lines.append(f"- … {len(verdict.moved) - MOVED_SHOWN} more in report.md")
            lines.append("")
        else:
            lines += ["No pair moved: every pair has the same gold sessions in its top k in both builds.", ""]
    if verdict.notes:
        lines += ["### Worth knowing", "", *(f"- {note}" for note in verdict.notes), ""]
    return "\n".join(lines)


def junit(verdict: Verdict) -> str:
    """gate.xml: JUnit, one test case per measure and category (a worse one a failure); a run that
    cannot be judged is one test case in error."""
    cases = []
    for r in verdict.rows:
        case = ElementTree.Element(
            "testcase", classname=f"vipune-eval gate.{r.category or 'all pairs'}", name=r.label, time="0"
        )
        if r.failing:
            failure = ElementTree.SubElement(case, "failure", message=r.words(), type="worse than the baseline")
            failure.text = r.words()
        cases.append(case)
    if verdict.code == CANNOT:
        case = ElementTree.Element("testcase", classname="vipune-eval gate", name="the run can be judged", time="0")
        error = ElementTree.SubElement(case, "error", message="; ".join(verdict.reasons), type="cannot judge")
        error.text = "\n".join(verdict.reasons)
        cases = [case]
    counts = {
        "tests": str(len(cases)),
        "failures": str(sum(c.find("failure") is not None for c in cases)),
        "errors": str(sum(c.find("error") is not None for c in cases)),
        "skipped": "0",
        "time": "0",
    }
    suites = ElementTree.Element("testsuites", {"name": "vipune-eval gate", **counts})
    suite = ElementTree.SubElement(suites, "testsuite", {"name": verdict.suite, **counts})
    properties = ElementTree.SubElement(suite, "properties")
    ElementTree.SubElement(properties, "property", name="verdict", value=WORDS[verdict.code])
    ElementTree.SubElement(properties, "property", name="exit code", value=str(verdict.code))
    suite.extend(cases)
    ElementTree.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(suites, encoding="unicode") + "\n"


def terminal(verdict: Verdict, run: Path) -> str:
    """What the command prints: the verdict, why, and where its files are."""
    lines = [f"vipune-eval gate: {WORDS[verdict.code]} (exit {verdict.code}): {verdict.headline}"]
    lines += [f"  {reason}" for reason in verdict.reasons]
    lines += [
        f"  {under(run, paths.GATE_MD)}   the pull-request comment",
        f"  {under(run, paths.GATE_XML)}  JUnit, one test case per measure and category",
    ]
    return "\n".join(lines)


def run_gate(run: Path) -> int:
    """Judge the finished run in the folder ``run``, write its gate.md and gate.xml there, print the
    verdict, and return the exit status (0 pass, 1 fail, 2 cannot judge)."""
    verdict = judge(run)
    if run.is_dir():
        write_text(under(run, paths.GATE_MD), markdown(verdict))
        write_text(under(run, paths.GATE_XML), junit(verdict))
    print(terminal(verdict, run))
    return verdict.code
