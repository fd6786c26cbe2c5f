"""The run names of vipune's own code: one table (registry.vipune_runs), read by the presets, the
searches that write the runs, the plan, the report and the summary (issue 36)."""

import re

from support.scenarios import REPO
from vipune_eval.registry import retrievers, vipune_runs

PACKAGE = REPO / "vipune_eval"


def test_the_presets_are_the_tables_runs():
    for runs, kind in ((vipune_runs.BINARY, retrievers.Kind.VIPUNE), (vipune_runs.LIB, retrievers.Kind.LIB)):
        for search in vipune_runs.SEARCHES:
            spec = retrievers.spec(runs.of(search))
            assert spec.kind is kind and spec.mirror["use"] == ("hybrid" if search == "hybrid" else "dense")


def test_no_other_module_types_a_run_name():
    names = [vipune_runs.BINARY.semantic, vipune_runs.LIB.hybrid, vipune_runs.LIB.semantic]
    typed = [f"{path.relative_to(PACKAGE)}: {name}" for folder in ("stages", "plan", "registry")
             for path in (PACKAGE / folder).rglob("*.py") if path.name != "vipune_runs.py"
             for name in names if re.search(rf"[\"']{name}[\"']", path.read_text())]
    assert not typed, typed
