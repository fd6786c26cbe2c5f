"""The binary lane's resume key follows every flag of its searches (issue 36)."""

from pathlib import Path

import numpy as np

from vipune_eval.core.persona import Persona
from vipune_eval.stages.search.vipune import persona_key, searches
from vipune_eval.vipune.client import Vipune
from vipune_eval.vipune.settings import VipuneSettings
from vipune_eval.vipune.import_format import import_lines

SETTINGS = VipuneSettings("vipune", Path("fp.json"), Path("hf"), Path("tmp"), 30.0)


def persona():
    vectors = np.eye(3, dtype=np.float32)
    return Persona("q1", "where is my violin?", [f"q1::s{i}" for i in range(3)], [f"s{i}" for i in range(3)],
                   ["2023-01-01T00:00:00Z"] * 3, ["user: a", "user: b", "user: c"], vectors, vectors[0])


def test_a_new_search_flag_reaches_both_the_command_line_and_the_resume_key(monkeypatch, tmp_path):
    """A configurable vipune flag is one line of VipuneSettings.search_flags: a shard resumed
    after it changed cannot reuse hits searched with the old value."""
    p = persona()
    lines = import_lines(p)
    before = persona_key(p, searches(SETTINGS, 10), lines)
    assert persona_key(p, searches(SETTINGS, 11), lines) != before
    shipped = VipuneSettings.search_flags
    monkeypatch.setattr(VipuneSettings, "search_flags",
                        lambda self, limit, hybrid: [*shipped(self, limit, hybrid), "--new-flag", "1"])
    assert persona_key(p, searches(SETTINGS, 10), lines) != before
    args = Vipune(Path("vipune"), tmp_path, 5).search_args(tmp_path / "db", "q1", p.question,
                                                          searches(SETTINGS, 10)["hybrid"])
    assert args[args.index("search") + 1:] == ["--hybrid", "--recency", "0", "--limit", "10", "--no-touch",
                                               "--new-flag", "1", "--", p.question]
