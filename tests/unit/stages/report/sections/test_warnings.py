"""stages/report/sections/warnings.py: what changes the reading of the numbers."""

from __future__ import annotations

import pytest

from vipune_eval.stages.report.build import build
from vipune_eval.stages.report.markdown import render

from support.report import loaded  # noqa: F401 (the fixture)


def test_refused_questions_are_named_with_why_in_the_first_lines(loaded, fake_vipune_bin, vipune_hf_home, tmp_path):
    """Issue 38: under vipune.on_error: record, a question vipune refuses (over 512 tokens: exit 3)
    is named, with why, in the summary's and report.md's first lines. The message is the one the
    vipune client records for the fake vipune's refusal, as the real one refuses."""
    from vipune_eval.stages.report import summary
    from vipune_eval.vipune.client import Vipune, VipuneError, VipuneSettings

    client = Vipune(fake_vipune_bin, tmp_path / "home", 30, hf_home=vipune_hf_home)
    with pytest.raises(VipuneError) as refused:
        settings = VipuneSettings(str(fake_vipune_bin), tmp_path / "fp.json", vipune_hf_home, tmp_path, 30)
        flags = settings.search_flags(10, True)
        client.search(tmp_path / "memories.db", "q3", " ".join(["word"] * 600), flags, "persona q3")
    injected = "persona q6: `vipune --json search --hybrid -- why` exited 1: injected; stderr: "
    loaded.views[0].metrics["vipune"]["failed"] = {"q3": str(refused.value), "q5": str(refused.value), "q6": injected}
    report = build(loaded)
    lines = summary.render(report).splitlines()
    why = "left out of every average (vipune.on_error: record; report.json lists why)"
    assert lines[4:7] == ["warnings:",
                          f"  ! vipune: 2 pairs failed and are {why}; vipune refuses a question over 512 tokens (exit 3): q3, q5",
                          f"  ! vipune: 1 pair failed and is {why}; vipune exited 1: q6"]
    text = render(report).splitlines()
    assert text[text.index("## Warnings") + 2] == (f"- vipune: 2 pairs failed and are {why}; vipune refuses a question over "
                                                   "512 tokens (exit 3): q3, q5")
    assert text.index("## Warnings") < 12 and text.index("## Warnings") < text.index("## Overall (95% intervals in brackets)")
