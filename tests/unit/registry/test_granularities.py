"""One owner per granularity (issue 21): vipune_eval.granularities says what each granularity
makes of a session; the views, filter, CLI and config ask it."""

import re

import pytest

from support.scenarios import REPO
from vipune_eval import cli
from vipune_eval.errors import EvalError
from vipune_eval.registry import granularities, views
from vipune_eval.stages.filter.reader import Instance
from vipune_eval.stages.filter.rows import seed_rows

PACKAGE = REPO / "vipune_eval"
SESSION = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
    {"role": "user", "content": "bye"},
]


def instance():
    return Instance(pair={}, sessions=[("s1", SESSION, "t"), ("s2", SESSION[:1], "t")], where="x")


def test_each_granularity_makes_its_rows_and_keys():
    by = {
        g: seed_rows(instance(), g, lambda turns: ["\n".join(turns[:2]), "\n".join(turns[2:])])
        for g in granularities.NAMES
    }
    assert [r.key for r in by["session"]] == ["s1", "s2"]
    assert by["session"][0].text == "user: hi\nassistant: hello\nuser: bye"
    assert [r.key for r in by["turn"]] == ["s1::1", "s1::2", "s1::3", "s2::1"]
    assert [r.key for r in by["chunk"]][:2] == ["s1::c1", "s1::c2"]
    assert all(r.session == r.key.split("::")[0] for rows in by.values() for r in rows)


def test_properties_drive_the_views():
    for name, g in granularities.GRANULARITIES.items():
        view = views.View("seed", name)
        assert view.rank_all == g.collapses and view.needs_tokenizer == g.needs_tokenizer
        assert view.ranking_settings({"search": {"row_limit": 999}, "search_limit": 7}).limit == (
            999 if g.collapses else 7
        )
        assert views.ROWS[name] in view.description()
    assert set(views.ROWS) == set(granularities.GRANULARITIES)  # the report's words for each one's rows
    assert views.OFFICIAL_GRANULARITIES == tuple(n for n, g in granularities.GRANULARITIES.items() if g.official)
    assert views.PRIMARY.granularity == granularities.PRIMARY


def test_the_config_is_checked_by_the_owner():
    with pytest.raises(EvalError, match=r"unknown granularity 'sentence' \(granularities: session, turn, chunk\)"):
        views.configured({"granularities": ["session", "sentence"], "protocol": "seed"})
    with pytest.raises(EvalError, match=r"has no session: session is required"):
        views.configured({"granularities": ["turn"], "protocol": "seed"})
    assert [v.granularity for v in views.configured({"granularities": ["chunk", "session"], "protocol": "seed"})] == [
        "session",
        "chunk",
    ]


def test_the_cli_names_no_granularity():
    """--granularity is required, with no default or choices of its own: the stage asks the registry."""
    sub = cli.parser()._subparsers._group_actions[0].choices["filter-rows"]
    option = next(a for a in sub._actions if "--granularity" in a.option_strings)
    assert option.required and option.default is None and option.choices is None


def test_no_other_module_types_a_granularity_name():
    """Tables keyed by every granularity (test-held to its names) are the only exceptions."""
    names = [n for n in granularities.NAMES if n != granularities.PRIMARY]
    tables = {"registry/granularities.py", "registry/views.py", "stages/embed/projection.py"}
    for path in PACKAGE.rglob("*.py"):
        if path.relative_to(PACKAGE).as_posix() in tables:
            continue
        for name in names:
            assert not re.search(rf"[\"']{name}[\"']", path.read_text()), (path.name, name)
