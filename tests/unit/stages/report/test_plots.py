"""stages/report/plots.py: the plots read report.json (the hand-made report of tests/support/report.py)."""

from __future__ import annotations

from vipune_eval.stages.report import plots
from vipune_eval.stages.report.report import build


def test_the_gold_rank_plot_has_a_bar_per_rank_to_the_primary_views_search_limit(loaded, tmp_path, monkeypatch):
    """The limit is the one the primary view's runs were searched to, as report.json states it (issue
    55: the plot no longer works it out again from the config), one bar more for "not in the top L"."""
    report = build(loaded)
    report["views"]["session"]["scored_with"]["ranking_settings"]["limit"] = 7
    report["provenance"]["config"]["search_limit"] = 12  # the config is not read
    drawn = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: drawn.append(fig))
    plots.gold_rank_distribution(report, tmp_path / "gold_ranks.png")
    [fig] = drawn
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == [*map(str, range(1, 8)), "not in\ntop 7"]


def test_no_caption_works_a_number_out_again_from_the_config():
    """Issue 55: a caption of the HTML report reads no ``snakemake.config`` (gold_ranks.rst once
    read the search limit there): the numbers a plot shows, it draws from report.json itself."""
    from support.scenarios import REPO

    captions = sorted((REPO / "workflow" / "report").glob("*.rst"))
    assert {f"{plot.name}.rst" for plot in plots.PLOTS} <= {c.name for c in captions}
    assert [c.name for c in captions if "snakemake.config" in c.read_text(encoding="utf-8")] == []
