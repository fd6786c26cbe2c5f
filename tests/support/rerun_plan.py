"""What a Snakemake dry run plans after an edit, and what it should plan: the workflow's rules and
the commands they run (read from workflow/rules/), the DAG of rules as Snakemake itself draws it
(``snakemake --rulegraph``), and the edits whose reruns the code-tracking tests check (the budgets
in tests/unit/plan/test_codeversion.py, the dry runs in tests/workflow/test_code_tracking.py).
Nothing here types the workflow's graph by hand."""

import re
from pathlib import Path

from support import scenarios
from vipune_eval.cli import COMMANDS

RULE = {c: c.replace("-", "_") for c in COMMANDS}  # the rule named after each command
EVERY = None  # an edit that reruns every rule that tracks its command's code
EDITS = {  # the edits of issue 28's list → the rules whose command reaches the module (whole workflow)
    "stages.embed.projection": {"report"},  # the projection's text
    "stages.filter.split": {"filter_pairs"},  # the dev/test split
    "vipune.client": {"preflight", "search_vipune"},
    "vipune.vipune_lane": {"search_vipune_lib"},  # the lib lane's driver: neither the binary's lane nor its preflight
    "vipune.settings": {"preflight", "search_vipune", "search_vipune_lib"},  # the search flags of both lanes
    "registry.measures": {"score", "report", "plots", "report_page"},
    "stages.report.markdown": {"report"},  # the report's Markdown
    "stages.report.sections.overall": {"report", "report_page"},  # the report's words: report.md, summary, HTML
    # issue 36's leaks, closed: a preset's description or a role reruns no arms job; the report's
    # words for a granularity's rows rerun the report only; a comparison sentence no score job
    "registry.retrievers": {"fuse_reference", "search_family", "search_plugin"},
    "registry.views": {"report", "plots", "report_page"},
    "stages.report.compare": {"report"},  # the statistics; the page renders words only
    "core.io": EVERY,  # shared by every stage: legitimately everything
}


def rule_bodies() -> dict[str, str]:
    """Every rule of workflow/rules/ → its body's text."""
    found: dict[str, str] = {}
    for path in sorted((scenarios.REPO / "workflow" / "rules").glob("*.smk")):
        text = path.read_text(encoding="utf-8")
        starts = list(re.finditer(r"^\s*rule (\w+):", text, re.M))
        for start, end in zip(starts, [*starts[1:], None]):
            found[start.group(1)] = text[start.end() : end.start() if end else len(text)]
    return found


def tracked_rules() -> set[str]:
    """The rules an edit of the package can rerun: each passes its command's code version as a
    param (plan.codeversion)."""
    return {rule for rule, body in rule_bodies().items() if "code_version(" in body}


def reruns(module: str) -> set[str]:
    """The rules an edit of ``module`` reruns by itself (EDITS), in the whole workflow."""
    return tracked_rules() if EDITS[module] is EVERY else EDITS[module]


def rule_graph(workdir: Path, env: dict[str, str], snakefile: Path = scenarios.SNAKEFILE) -> dict[str, set[str]]:
    """The DAG of rules of ``workdir``'s run as Snakemake draws it (``--rulegraph``: it parses the
    workflow and writes nothing): each rule → the rules that read its outputs (``all`` left out)."""
    dot = scenarios.snakemake(workdir, "--rulegraph", env=env, snakefile=snakefile).stdout
    names = dict(re.findall(r'^\s*(\d+)\[label = "(\w+)"', dot, re.M))
    graph: dict[str, set[str]] = {name: set() for name in names.values() if name != "all"}
    for source, target in re.findall(r"^\s*(\d+) -> (\d+)\s*$", dot, re.M):
        if names[target] != "all":
            graph[names[source]].add(names[target])
    return graph


def closure(rules, graph: dict[str, set[str]]) -> set[str]:
    """``rules`` and every rule downstream of them in ``graph``."""
    out, todo = set(), list(rules)
    while todo:
        rule = todo.pop()
        if rule not in out:
            out.add(rule)
            todo.extend(graph[rule])
    return out


def plan(out):
    """(every planned rule, the rules planned because a param — the code version — changed).

    Snakemake gives a job one reason: a job downstream of a rerun reads "input files updated",
    so only the topmost changed rules carry "params have changed"."""
    if "Nothing to be done" in out:
        return set(), set()
    table = out[out.index("Job stats:") : out.index("total")]
    planned = {m[1] for m in re.finditer(r"^(\w+)\s+\d+$", table, re.M)} - {"all"}
    reasons = out[out.index("Reasons:") :]
    params = re.search(r"params have changed since last execution:\n\s+(.*)", reasons)
    return planned, set(params.group(1).split(", ")) if params else set()
