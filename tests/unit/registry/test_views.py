"""A view's search flags: registry.views.View owns what every search ranks to (issue 36)."""

import pytest

from support.config import defaults
from support.scenarios import REPO
from vipune_eval import cli
from vipune_eval.registry.views import GRANULARITIES, OFFICIAL_GRANULARITIES, View

VIEWS = [View("seed", g) for g in GRANULARITIES] + [View("official", g) for g in OFFICIAL_GRANULARITIES]


@pytest.mark.parametrize("view", VIEWS, ids=lambda v: v.name)
def test_the_search_commands_read_what_the_view_says(view):
    config = defaults()
    config["search"]["row_limit"] = 900
    argv = ["search-family", "--rows", "r", "--texts", "t", "--embeddings", "e", "--shard", "0", "--shards", "1",
            *view.search_flags(config), "--retriever", "bm25-lme", "--out", "o"]
    shard = cli.stage_call(argv)[2]["shard"]
    assert (shard.limit, shard.depth, shard.collapse) == (view.search_limit(config), view.depth(config),
                                                          not view.turn_level_run)
    _, _, fuse = cli.stage_call(["fuse-reference", "--arms", "a", "--retriever", "hybrid", "--outputs", "o",
                                 *view.search_flags(config)])
    assert (fuse["limit"], fuse["depth"], fuse["collapse"]) == (shard.limit, shard.depth, shard.collapse)


def test_the_official_turn_view_keeps_its_rows():
    config = defaults()
    view = View("official", "turn")
    assert view.turn_level_run and view.depth(config) == config["search"]["row_limit"]


def test_no_rule_types_a_search_flag():
    """The rules pass View.search_flags; a second copy of --limit/--depth/--no-collapse fails here."""
    for path in (REPO / "workflow" / "rules").glob("*.smk"):
        for flag in ("--limit", "--depth", "--no-collapse"):
            assert flag not in path.read_text(), (path.name, flag)
