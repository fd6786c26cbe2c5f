"""core/failed_pair.py: a failed pair's fields, as the searches record them."""

from __future__ import annotations

from vipune_eval.core.failed_pair import FailedPair, failed_pair


def test_a_failed_pair_holds_what_happened_and_vipunes_exit_code_and_message_as_fields():
    assert failed_pair("persona q1: `vipune …` exited 3: too long", 3, "too long") == {
        "detail": "persona q1: `vipune …` exited 3: too long",
        "exit_code": 3,
        "error": "too long",
        "timeout": None,
    }
    assert set(FailedPair.__annotations__) == {"detail", "exit_code", "error", "timeout"}


def test_a_timeout_is_a_field_the_seconds_the_call_was_given():
    assert failed_pair("persona q1: `vipune …` did not finish within 300 s", timeout=300.0)["timeout"] == 300.0


def test_no_exit_code_and_no_message_are_none_an_empty_message_too():
    assert failed_pair("persona q1: vipune-lane: … ended (exit 1)") == {
        "detail": "persona q1: vipune-lane: … ended (exit 1)",
        "exit_code": None,
        "error": None,
        "timeout": None,
    }
    assert failed_pair("persona q1", 1, "")["error"] is None  # stderr that said nothing
