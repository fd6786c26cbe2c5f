"""Where things live under results/: core/paths.py owns each folder (issue 36)."""

import re

from support.scenarios import REPO

PACKAGE = REPO / "vipune_eval"


def test_the_download_folders_are_named_once():
    """paths.DATA_DOWNLOAD and paths.MODEL_DOWNLOAD: the rules and the workspace read them."""
    files = [*PACKAGE.rglob("*.py"), *(REPO / "workflow" / "rules").glob("*.smk")]
    typed = [f.relative_to(REPO).as_posix() for f in files if re.search(r"(data|model)/download", f.read_text())]
    assert typed == ["vipune_eval/core/paths.py"]


def test_no_rule_types_a_results_path():
    """The rules take every results path from core/paths.py: outputs, logs, benchmarks, folders."""
    for path in (REPO / "workflow" / "rules").glob("*.smk"):
        assert "results/" not in path.read_text(), path.name


def test_each_rule_logs_and_benchmarks_under_its_own_name():
    rules = "\n".join(p.read_text() for p in (REPO / "workflow" / "rules").glob("*.smk"))
    for rule, body in re.findall(r"^\s*rule (\w+):\n(.*?)(?=^\s*rule |\Z)", rules, re.M | re.S):
        named = re.findall(r"paths\.(?:log|benchmark)\(\"(\w+)\"", body)
        assert named and set(named) == {rule}, (rule, named)
