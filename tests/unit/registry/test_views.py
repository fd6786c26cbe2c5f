"""What a view ranks to: registry.views.View builds it once, as one typed value (issues 36, 55)."""

import pytest

from support.config import defaults
from support.scenarios import REPO
from vipune_eval import cli
from vipune_eval.registry import measures
from vipune_eval.registry.views import GRANULARITIES, OFFICIAL_GRANULARITIES, View

VIEWS = [View("seed", g) for g in GRANULARITIES] + [View("official", g) for g in OFFICIAL_GRANULARITIES]


@pytest.mark.parametrize("view", VIEWS, ids=lambda v: v.name)
def test_the_search_commands_read_what_the_view_says(view):
    config = defaults()
    config["search"]["row_limit"] = 900
    settings = view.ranking_settings(config)
    argv = [
        "search-family",
        "--rows",
        "r",
        "--texts",
        "t",
        "--embeddings",
        "e",
        "--shard",
        "0",
        "--shards",
        "1",
        *settings.options(),
        "--retriever",
        "bm25-lme",
        "--out",
        "o",
    ]
    assert cli.stage_call(argv)[2]["shard"].ranking_settings == settings  # the value the view built, typed again
    _, _, fuse = cli.stage_call(
        ["fuse-reference", "--arms", "a", "--retriever", "hybrid", "--outputs", "o", *settings.options()]
    )
    assert fuse["ranking_settings"] == settings
    assert settings.collapse == (not view.turn_level_run)
    rows = config["search"]["row_limit"]
    assert settings.limit == (
        rows if view.rank_all else max(measures.OFFICIAL_KS) if view.official else config["search_limit"]
    )


def test_the_official_turn_view_keeps_its_rows():
    config = defaults()
    view = View("official", "turn")
    assert view.turn_level_run and view.ranking_settings(config).depth == config["search"]["row_limit"]


def test_no_rule_types_a_search_flag():
    """The rules pass View.ranking_settings's options; a second copy of --limit/--depth/--no-collapse fails here."""
    for path in (REPO / "workflow" / "rules").glob("*.smk"):
        for flag in ("--limit", "--depth", "--no-collapse"):
            assert flag not in path.read_text(), (path.name, flag)
