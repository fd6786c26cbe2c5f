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


def fixture_tree(variable: str) -> Path:
    """A vipune source tree .ci/run set up and built (its folder in ``variable``): skipped, saying
    why, where there is none, and failed where the real vipune is required."""
    import pytest

    folder = os.environ.get(variable)
    if not folder or not (Path(folder) / "Cargo.lock").is_file():
        why = f"{variable} names no vipune source tree (.ci/run sets one up and builds it)"
        if required():
            pytest.fail(f"{REQUIRED}=required, but {why}")
        pytest.skip(why)
    return Path(folder)


def binary_rankings(binary: Path, persona, hf_home: Path, tmp: Path, limit: int = 10):
    """What the binary itself does with ``persona``: (its own embedding of the question, read back
    by ``add`` then ``export``; {"semantic": [(id, score)], "hybrid": [...]} of its two searches on
    a database seeded by ``import``). The vipune-lane fed that very vector must answer the same lists."""
    import base64
    import json

    import numpy as np

    from vipune_eval.vipune.client import Vipune
    from vipune_eval.vipune.import_format import import_lines
    from vipune_eval.vipune.settings import VipuneSettings

    tmp.mkdir(parents=True, exist_ok=True)
    vipune = Vipune(binary, tmp / "home", 120, hf_home=hf_home)
    vipune.add(tmp / "probe.db", "probe", persona.question, "test")
    vipune.export(tmp / "probe.db", tmp / "export.jsonl", "test")
    [row] = [json.loads(line) for line in (tmp / "export.jsonl").read_text().splitlines()[1:] if line.strip()]
    query = np.frombuffer(base64.b64decode(row["embedding"]), "<f4")
    (tmp / "import.jsonl").write_text("\n".join(import_lines(persona)) + "\n", encoding="utf-8")
    vipune.import_file(tmp / "persona.db", tmp / "import.jsonl", "test")
    flags = VipuneSettings("", Path(), None, Path(), 0).search_flags
    rankings = {}
    for name, hybrid in (("semantic", False), ("hybrid", True)):
        hits, _ = vipune.search(
            tmp / "persona.db", persona.question_id, persona.question, flags(limit, hybrid), limit, "test"
        )
        rankings[name] = [(h["id"], h["similarity"]) for h in hits]
    return query, rankings
