"""The real vipune, built from crates.io by .ci/vipune/build.sh: where the tests find it.

Tests marked ``real_vipune`` run the real binary. They never start a build (a cold one takes
minutes): they ask build.sh for an earlier build of the release and are skipped, with the
reason and the command that builds it, when there is none. ``.ci/run`` builds the releases first
and sets VIPUNE_EVAL_REAL_VIPUNE=required, under which a missing build fails the tests instead.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from vipune_eval.vipune.release import RELEASE

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / ".ci" / "vipune" / "build.sh"
OLDER = "0.19.1"  # the earlier release the two-build comparison runs against RELEASE
REQUIRED = "VIPUNE_EVAL_REAL_VIPUNE"


def find(version: str = RELEASE) -> tuple[Path | None, str]:
    """(the binary, "") of an earlier build of ``version``, or (None, why there is none)."""
    proc = subprocess.run(["bash", str(BUILD), "--cached", version], capture_output=True, text=True)
    if proc.returncode == 0:
        return Path(proc.stdout.strip()), ""
    return None, proc.stderr.strip() or f"build.sh --cached {version} exited {proc.returncode}"


def required() -> bool:
    return os.environ.get(REQUIRED) == "required"
