"""Code tracking follows the package's import graph: editing a module reruns exactly the rules
whose command reaches it (issue 11). Each module is edited in a copy of the repository and the
plan is read from a Snakemake dry run; the expectations below are written by hand from what each
command runs, independently of vipune_eval.codeversion."""

import re
import shutil
from pathlib import Path

import pytest

from support import scenarios

REPO = Path(__file__).resolve().parent.parent
ALL = {"filter", "filter_rows", "embed", "vipune_home", "preflight", "search_reference", "fuse_reference",
       "search_vipune", "score", "report", "plots"}
# issue 21: fuse_reference (the family runs, fused from search_reference's arms) runs reference.py
VIPUNE_CALLS = {"vipune_home", "preflight", "search_reference", "fuse_reference", "search_vipune"}
DIRECT = {  # module → the rules whose `vipune-eval <command>` can execute it
    "__init__": ALL, "__main__": ALL, "cli": ALL, "core.io": ALL,
    "stages.download": {"vipune_home", "preflight"},
    "vipune.client": VIPUNE_CALLS,
    "stages.filter.filter": {"filter", "filter_rows"},
    "stages.filter.split": {"filter", "filter_rows"},
    "core.tokens": {"filter", "filter_rows", "embed", "preflight"},
    "core.trec": {"filter", "filter_rows", "search_reference", "fuse_reference", "search_vipune", "preflight",
             "score", "report"},
    "stages.embed.embed": {"embed", "preflight"},
    "stages.embed.store": {"embed", "preflight"},  # embed reads and writes the shared vector store
    "stages.embed.onnx_graph": {"embed", "preflight"},  # the graph both load, less its NaN guards
    "stages.embed.tally": {"embed", "preflight", "report"},  # embed tallies its model calls, report sums them
    "core.persona": {"search_reference", "fuse_reference", "search_vipune", "preflight"},
    "stages.search.reference": {"search_reference", "fuse_reference"},
    "registry.retrievers": {"search_reference", "fuse_reference"},
    "stages.search.plugin": set(),  # search_plugin only, and no plugin is configured here
    "stages.search.vipune_lane": {"search_vipune", "preflight"},
    "stages.search.preflight": {"preflight"},
    "core.longmemeval": {"filter", "filter_rows", "score"},  # filter names a repeated session with its copy_id
    "registry.measures": {"score", "report", "plots"},
    "registry.views": {"report", "plots"},  # the primary view's name
    "registry.granularities": {"filter", "filter_rows", "report", "plots"},  # rows of a session; the primary's name
    "core.paths": {"report", "plots"},
    "core.stats": {"score", "report"},
    "stages.score": {"score"},
    "stages.report.report": {"report"},
    "stages.report.diagnostics": {"report"},
    "stages.report.plots": {"plots"},
    "stages.report.whatif": {"report"},  # the what-if choice and its confirmation
    # parse-time set-up only: no rule runs them
    "plan.workspace": set(), "plan.codeversion": set(), "plan.cluster": set(), "registry.datasets": set(), "plan.failures": set(),
    "plan.whatif_grid": set(),
}
# importing a module runs the __init__ of every package above it
for _package in ("core", "registry", "vipune", "stages", "stages.filter", "stages.embed", "stages.search",
                 "stages.report", "plan"):
    DIRECT[f"{_package}.__init__"] = set().union(*(rules for m, rules in DIRECT.items()
                                                   if m.startswith(_package + ".")))


def snakemake(repo, workdir, *args, env):
    return scenarios.snakemake(workdir, *args, env=env, snakefile=repo / "Snakefile").stdout


@pytest.fixture(scope="module")
def copy(tmp_path_factory, workflow_env, scenario_inputs):
    root = tmp_path_factory.mktemp("tracking")
    repo = root / "repo"
    repo.mkdir()
    for part in ("Snakefile", "workflow", "config", "vipune_eval", "profiles"):
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, repo / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, repo / part)
    workdir = scenarios.make_workdir(root / "run", *scenario_inputs("tracking"), scenario="tracking")
    snakemake(repo, workdir, "--cores", "2", env=workflow_env)
    return repo, workdir


DOWNSTREAM = {  # rule → the rules that read its outputs (the workflow's DAG, one view)
    "filter": {"score", "report"}, "filter_rows": {"embed", "search_reference", "search_vipune", "report"},
    "embed": {"search_reference", "search_vipune", "report"}, "vipune_home": {"preflight", "search_vipune"},
    "preflight": {"search_vipune", "report"}, "search_reference": {"fuse_reference"},
    "fuse_reference": {"score"}, "search_vipune": {"score"},
    "score": {"report"}, "report": {"plots"}, "plots": set(),
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


def test_every_module_of_the_package_is_in_the_table():
    package = REPO / "vipune_eval"
    assert set(DIRECT) == {".".join(p.relative_to(package).with_suffix("").parts) for p in package.rglob("*.py")}


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(DIRECT))
def test_editing_a_module_reruns_exactly_the_rules_that_reach_it(copy, workflow_env, module):
    repo, workdir = copy
    path = (repo / "vipune_eval").joinpath(*module.split(".")).with_suffix(".py")
    original = path.read_bytes()
    try:
        path.write_bytes(original + b"\n# an edit\n")
        out = snakemake(repo, workdir, "-n", "--cores", "1", env=workflow_env)
    finally:
        path.write_bytes(original)
    planned, changed = plan(out)
    direct = DIRECT[module]
    assert planned == closure(direct), out[-2000:]
    topmost = {r for r in direct if not any(r in DOWNSTREAM[u] for u in closure(direct) - {r})}
    assert changed == topmost, out[-2000:]


def test_code_version_follows_a_new_import(tmp_path):
    """A module that starts importing another is tracked without anyone updating a list."""
    from vipune_eval.plan.codeversion import code_version, command_modules, import_graph

    package = tmp_path / "vipune_eval"
    shutil.copytree(REPO / "vipune_eval", package)
    assert "core.stats" not in command_modules("plots", package)
    before = code_version("plots", package)
    stats = package / "core" / "stats.py"
    stats.write_text(stats.read_text() + "\n# changed\n")
    assert code_version("plots", package) == before
    plots = package / "stages" / "report" / "plots.py"
    plots.write_text(plots.read_text() + "\n\ndef _later():\n    from ...core.stats import holm  # noqa: F401\n")
    import_graph.cache_clear()
    assert "core.stats" in command_modules("plots", package)
    assert code_version("plots", package) != before
