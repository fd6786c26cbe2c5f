"""Where things live under results/: core/paths.py owns each folder (issue 36)."""

import re

from support.scenarios import REPO

PACKAGE = REPO / "vipune_eval"


def test_the_download_folders_are_named_once():
    """paths.DATA_DOWNLOAD and paths.MODEL_DOWNLOAD: the rules and the workspace read them."""
    files = [*PACKAGE.rglob("*.py"), *(REPO / "workflow" / "rules").glob("*.smk")]
    typed = [f.relative_to(REPO).as_posix() for f in files if re.search(r"(data|model)/download", f.read_text())]
    assert typed == ["vipune_eval/core/paths.py"]
