"""stages/report/sections/warnings.py: what changes the reading of the numbers, failed pairs first."""

from __future__ import annotations

import pytest

from support.report import (
    RANKED,
    add_view,
    markdown_of,
    metrics,
    summary_of,
)
from vipune_eval.core.failed_pair import failed_pair
from vipune_eval.stages.report.report import build
from vipune_eval.stages.report.sections.contents import document
from vipune_eval.stages.report.sections.warnings import failure_reason

WHY = "left out of every average (vipune.on_error: record; report.json lists why)"


def test_refused_questions_are_named_with_vipunes_own_words_in_the_first_lines(
    loaded, fake_vipune_bin, vipune_hf_home, tmp_path
):
    """Issues 38 and 43.4: under vipune.on_error: record, a question vipune refuses (over 512 tokens:
    exit 3) is named in the summary's and report.md's first lines with vipune's own message and
    exit code, the fields the vipune client records for the fake vipune's refusal (as the real
    one refuses)."""
    from vipune_eval.vipune.client import Vipune, VipuneError
    from vipune_eval.vipune.settings import VipuneSettings

    client = Vipune(fake_vipune_bin, tmp_path / "home", 30, hf_home=vipune_hf_home)
    with pytest.raises(VipuneError) as refused:
        settings = VipuneSettings(str(fake_vipune_bin), tmp_path / "fp.json", vipune_hf_home, tmp_path, 30)
        client.search(
            tmp_path / "memories.db", "q3", " ".join(["word"] * 600), settings.search_flags(10, True), 10, "persona q3"
        )
    too_long = failed_pair(str(refused.value), refused.value.exit_code, refused.value.error)
    injected = failed_pair(
        "persona q6: `vipune --json search --hybrid -- why` exited 1: injected; stderr: ", 1, "injected"
    )
    loaded.views[0].metrics["vipune"] = metrics(
        tmp_path / "failed", "vipune", {"q3": too_long, "q5": too_long, "q6": injected}
    )
    report = build(loaded)
    said = refused.value.error
    assert said.startswith("content exceeds 512-token embedding limit (measured: ")
    lines = summary_of(report).splitlines()
    assert lines[4:7] == [
        "warnings:",
        f'  ! vipune: 2 pairs failed and are {WHY}; vipune exited 3 saying "{said}": q3, q5',
        f'  ! vipune: 1 pair failed and is {WHY}; vipune exited 1 saying "injected": q6',
    ]
    text = markdown_of(report).splitlines()
    assert (
        text[text.index("## Warnings") + 2]
        == f'- vipune: 2 pairs failed and are {WHY}; vipune exited 3 saying "{said}": q3, q5'
    )
    assert text.index("## Warnings") < 12 and text.index("## Warnings") < text.index(
        "## Overall (95% intervals in brackets)"
    )


@pytest.mark.parametrize(
    "failure, reason",
    [
        (
            failed_pair("persona q1: `vipune … search …` exited 1: Input too long; stderr: ", 1, "Input too long"),
            'vipune exited 1 saying "Input too long"',
        ),
        (
            failed_pair("persona q1: vipune-lane: Input too long", None, "Input too long"),  # the lib lane: no process
            'vipune said "Input too long"',
        ),
        (
            failed_pair("persona q1: `vipune … search …` exited 7: whatever the text says", None, None),  # fields only
            "no exit code and no message from vipune",
        ),
        (failed_pair("persona q1: `vipune …` exited 2", 2, None), "vipune exited 2"),
        # issue 51 item 6: a timeout under vipune.on_error: record read "no exit code and no message from vipune"
        (
            failed_pair(
                "persona q1: `vipune …` did not finish within 300 s (vipune.timeout) and was killed", timeout=300.0
            ),
            "vipune gave no answer within 300 s (vipune.timeout) and was killed: raise vipune.timeout, or see whether "
            "vipune hangs on these questions",
        ),
        (
            {"detail": "an earlier version's status file", "exit_code": None, "error": None},
            "no exit code and no message from vipune",
        ),
        (failed_pair("persona q1", 1, "line one\n  line two " + "x" * 300), None),
    ],
)
def test_a_failures_reason_is_vipunes_own_message_read_from_its_fields_never_from_the_text(failure, reason):
    got = failure_reason(failure)
    if reason is not None:
        assert got == reason
    else:  # a long message on several lines: one line, cut
        assert got.startswith('vipune exited 1 saying "line one line two xxx') and got.endswith('…"') and len(got) < 240


def test_a_failure_in_the_turn_view_is_named_in_the_warnings(loaded, tmp_path):
    """Issue 44.1: the turn view's vipune-lib failed a pair (its vipune-lane refused it): the warnings name
    it, with the view and vipune's message, though the primary view failed nothing."""
    refused = failed_pair("persona q3: vipune-lane: Input too long", None, "Input too long")
    loaded.manifest["retrievers"] = ["dense", "hybrid", "vipune", "vipune-lib"]
    lib = metrics(tmp_path / "session", "vipune-lib", ranked=RANKED["vipune"])
    loaded.views[0].metrics["vipune-lib"] = lib
    add_view(
        loaded,
        "turn",
        {
            "vipune": metrics(tmp_path / "turn", "vipune"),
            "vipune-lib": metrics(tmp_path / "turn", "vipune-lib", {"q3": refused}, RANKED["vipune"]),
        },
    )
    report = build(loaded)
    assert report["granularities"]["turn"]["retrievers"]["vipune-lib"]["pairs"] == 7
    named = f'vipune-lib in the turn view: 1 pair failed and is {WHY}; vipune said "Input too long": q3'
    assert f"  ! {named}" in summary_of(report).splitlines()
    assert f"- {named}" in markdown_of(report).splitlines()


def test_a_pair_failed_in_several_views_is_one_line_naming_them(loaded, tmp_path):
    refused = failed_pair("persona q3: … exited 3: …", 3, "content exceeds 512-token embedding limit")
    loaded.views[0].metrics["vipune"] = metrics(tmp_path / "session", "vipune", {"q3": refused})
    add_view(
        loaded,
        "turn",
        {"vipune": metrics(tmp_path / "turn", "vipune", {"q3": refused}), "dense": metrics(tmp_path / "turn", "dense")},
    )
    warned = [w for w in document(build(loaded)).warnings if "failed" in w]
    assert warned == [
        f"vipune in the session and turn views: 1 pair failed and is {WHY}; vipune exited 3 saying "
        '"content exceeds 512-token embedding limit": q3'
    ]
