"""vipune/settings.py: one settings object for both lanes; the lib lane is given the binary's very
search options, but the search kind (it runs both)."""

from pathlib import Path

from vipune_eval.vipune.settings import VipuneSettings


def test_the_lib_lanes_flags_are_the_binarys_but_the_search_kind():
    settings = VipuneSettings("vipune", Path("fp.json"), None, Path("tmp"), 30.0)
    assert settings.search_flags(10, True) == ["--hybrid", *settings.query_flags(10)]
    assert settings.search_flags(10, False) == ["--no-hybrid", *settings.query_flags(10)]
    assert settings.query_flags(7)[settings.query_flags(7).index("--limit") + 1] == "7"
    assert "--recency" in settings.query_flags(10) and "--no-touch" in settings.query_flags(10)
