"""What a Snakemake dry run plans after an edit, and what it should plan: the workflow's rules, the
DAG downstream of each (one view) and the edits whose reruns the code-tracking tests check (the
budgets in tests/unit/plan/test_codeversion.py, the dry runs in tests/workflow/test_code_tracking.py)."""

import re

from vipune_eval.cli import COMMANDS

RULE = {c: c.replace("-", "_") for c in COMMANDS}  # the rule named after each command
RULES = {"filter_pairs", "filter_rows", "embed", "vipune_home", "preflight", "search_arms",
         "fuse_reference", "search_vipune", "search_vipune_lib", "score", "report", "plots",
         "report_page"}  # the tracking scenario's
DOWNSTREAM = {  # rule → the rules that read its outputs (the workflow's DAG, one view)
    "filter_pairs": {"score", "report"},
    "filter_rows": {"embed", "search_arms", "search_vipune", "search_vipune_lib", "report"},
    "embed": {"search_arms", "search_vipune", "search_vipune_lib", "report"},
    "vipune_home": {"preflight", "search_vipune"}, "preflight": {"search_vipune", "report"},
    "search_arms": {"fuse_reference"}, "fuse_reference": {"score"}, "search_vipune": {"score"},
    "search_vipune_lib": {"score", "report"},  # the report's explanations read its arms
    "score": {"report"}, "report": {"plots", "report_page"}, "plots": {"report_page"}, "report_page": set(),
}
EDITS = {  # the edits of issue 28's list → the rules whose command reaches the module
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
    "registry.retrievers": {"fuse_reference"},
    "registry.views": {"report", "plots", "report_page"},
    "stages.report.compare": {"report", "report_page"},
    "core.io": RULES,  # shared by every stage: legitimately everything
}


def closure(rules):
    out, todo = set(), list(rules)
    while todo:
        rule = todo.pop()
        if rule not in out:
            out.add(rule)
            todo.extend(DOWNSTREAM[rule])
    return out


def plan(out):
    """(every planned rule, the rules planned because a param — the code version — changed).

    Snakemake gives a job one reason: a job downstream of a rerun reads "input files updated",
    so only the topmost changed rules carry "params have changed"."""
    if "Nothing to be done" in out:
        return set(), set()
    table = out[out.index("Job stats:"):out.index("total")]
    planned = {m[1] for m in re.finditer(r"^(\w+)\s+\d+$", table, re.M)} - {"all"}
    reasons = out[out.index("Reasons:"):]
    params = re.search(r"params have changed since last execution:\n\s+(.*)", reasons)
    return planned, set(params.group(1).split(", ")) if params else set()
