"""The errors a user can act on: the message names what failed, the fix comes last on its own line."""

from vipune_eval.errors import FIX, PREFIX, BinaryNotFound, EvalError


def test_the_fix_is_the_last_line_a_user_reads():
    error = EvalError("results/x.json: not found", fix="run the workflow again")
    assert error.shown("score") == f"{PREFIX}score: results/x.json: not found\n{FIX}run the workflow again"
    assert error.shown() == f"{PREFIX}results/x.json: not found\n{FIX}run the workflow again"


def test_without_a_fix_there_is_one_line():
    assert EvalError("broke").shown("embed") == f"{PREFIX}embed: broke"


def test_a_log_line_holds_both():
    assert str(EvalError("broke", fix="mend it")) == "broke — mend it"
    assert str(EvalError("broke")) == "broke"


def test_a_missing_binary_is_an_error_a_user_can_act_on():
    assert isinstance(BinaryNotFound("no vipune", fix="build it"), EvalError)
