"""core/ranking_settings.py: what a view's searches rank to, one typed value from the config to the
report (issue 55 item 2): built once by the view, crossing to each job as its command line and read
back by the CLI alone, recorded as itself by what the searches and the score write."""

import re
from dataclasses import asdict
from pathlib import Path

from support.config import defaults
from support.scenarios import REPO
from vipune_eval import cli
from vipune_eval.core.persona import ShardSearch
from vipune_eval.core.ranking_settings import RankingSettings
from vipune_eval.registry.views import View


def test_the_settings_cross_to_a_job_as_its_options_and_arrive_unchanged():
    for settings in (RankingSettings(10, 10), RankingSettings(1000, 50), RankingSettings(1000, 1000, collapse=False)):
        _, _, fuse = cli.stage_call(
            ["fuse-reference", "--arms", "a", "--retriever", "dense", "--outputs", "o", *settings.options()]
        )
        _, _, score = cli.stage_call(
            [
                "score",
                "--qrels",
                "q",
                "--pairs",
                "p",
                "--runs",
                "r",
                "--name",
                "n",
                "--run-out",
                "o",
                "--metrics-out",
                "m",
                "--ks",
                "1",
                "--measures",
                "recall",
                *settings.options(),
            ]
        )
        assert fuse["ranking_settings"] == score["scoring"].ranking_settings == settings


def test_the_official_turn_view_keeps_every_row_and_says_so():
    config = defaults()
    settings = View("official", "turn").ranking_settings(config)
    assert settings == RankingSettings(config["search"]["row_limit"], config["search"]["row_limit"], collapse=False)
    assert "--no-collapse" in settings.options()


def test_what_a_search_records_is_the_settings_themselves():
    shard = ShardSearch(Path("r"), Path("t"), (Path("e"),), 0, 1, RankingSettings(10, 5, collapse=False))
    searched = shard.searched(["--recency", "0", "--limit", "10", "--no-touch"], {"q1": ["a", "b"]})
    assert (
        searched["settings"]["ranking_settings"]
        == asdict(shard.ranking_settings)
        == {"limit": 10, "depth": 5, "collapse": False}
    )


def test_no_module_reads_a_setting_back_from_a_command_line():
    """The CLI is the one reader of a command line: nothing in the package finds a value in a list
    of flags again (the client once took the limit back out of vipune's flags)."""
    found = [
        f"{path.relative_to(REPO)}: {m.group(0)}"
        for path in sorted((REPO / "vipune_eval").rglob("*.py"))
        for m in re.finditer(r"\.index\(\s*[\"']--[\w-]+[\"']\s*\)", path.read_text(encoding="utf-8"))
    ]
    assert not found, found
