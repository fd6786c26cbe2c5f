"""stages/report/plots.py: the plots read report.json (the hand-made report of tests/support/report.py)."""

from __future__ import annotations

from vipune_eval.stages.report import plots
from vipune_eval.stages.report.report import build

from support.report import loaded  # noqa: F401 (the fixture)


def test_the_gold_rank_plot_has_a_bar_per_rank_to_the_primary_views_search_limit(loaded, tmp_path, monkeypatch):
    """The limit is the primary view's (registry.views owns it), one bar more for "not in the top L"."""
    loaded.config["search_limit"] = 7
    drawn = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: drawn.append(fig))
    plots.gold_rank_distribution(build(loaded), tmp_path / "gold_ranks.png")
    [fig] = drawn
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == [*map(str, range(1, 8)), "not in\ntop 7"]
