"""The what-if lab's verdict (stages/report/whatif.py, worded by sections/lab.py): the chosen variant is the best on the
selection split (ties to the base's own setting, else the first in grid order), and on the other
split every variant is tested against the base with Holm's correction over the whole grid."""

import pytest

from vipune_eval.stages.filter import split
from vipune_eval.stages.report import whatif
from vipune_eval.stages.report.sections.lab import verdict


def test_the_splits_are_the_filters():
    assert whatif.SPLITS is split.SPLITS and split.SPLITS == (split.DEV, split.TEST) == ("dev", "test")


def test_choose_best_then_base_then_grid_order():
    assert whatif.choose([0.5, 0.75, 0.7], base_index=0) == 1
    assert whatif.choose([0.5, 0.75, 0.75], base_index=2) == 2  # the base's setting is tied: it
    assert whatif.choose([0.75, 0.5, 0.75], base_index=1) == 0  # not tied: the first in grid order
    assert whatif.choose([0.75, 0.5, 0.75], base_index=None) == 0
    assert whatif.choose([0.1 + 0.2, 0.3], base_index=1) == 1  # equal up to float rounding


M = "recall_any@5"


def run(name, params, dev, test):
    """A run's per-pair values: dev pairs d0.., test pairs t0.."""
    per_query = {f"d{i}": {M: v, "split": "dev"} for i, v in enumerate(dev)}
    per_query |= {f"t{i}": {M: v, "split": "test"} for i, v in enumerate(test)}
    return {"name": name, "params": params, "run": f"results/runs/{name}.run", "per_query": per_query}


BASE = {"k": 25}


BASE_RUN = run("hybrid", BASE, dev=[1, 0, 0, 0], test=[1, 0, 1, 0, 0, 0, 0, 0])


def grid_runs():
    return [
        run("hybrid~k=10", {"k": 10}, dev=[1, 1, 0, 0], test=[1, 0, 1, 0, 0, 0, 0, 0]),
        run("hybrid~k=25", BASE, dev=[1, 0, 0, 0], test=[1, 0, 1, 0, 0, 0, 0, 0]),
        run("hybrid~k=60", {"k": 60}, dev=[1, 1, 0, 0], test=[1, 1, 1, 1, 1, 1, 1, 0]),
        run("hybrid~k=90", {"k": 90}, dev=[1, 1, 1, 0], test=[1, 0, 1, 1, 0, 0, 0, 0]),
    ]


def test_analyse_by_hand(monkeypatch):
    ps = iter([0.01, 1.0, 0.04, 0.03])  # hand-picked p of each variant, grid order
    monkeypatch.setattr(whatif, "paired_randomization", lambda a, b, **_: next(ps))
    block = whatif.analyse(M, "dev", BASE_RUN, grid_runs())
    rows = {r["name"]: r for r in block["variants"]}
    assert block["tried"] == 4 and block["base"]["dev"] == 0.25 and block["base"]["test"] == 0.25
    assert block["base"]["pairs"] == {"dev": 4, "test": 8}
    assert rows["hybrid~k=90"]["dev"] == 0.75 and rows["hybrid~k=90"]["test"] == 0.375
    assert rows["hybrid~k=60"]["test_delta"] == pytest.approx(0.625)  # (7 - 2) / 8
    assert rows["hybrid~k=90"]["test_delta"] == pytest.approx(0.125)
    assert rows["hybrid~k=25"]["test_delta"] == 0.0
    # Holm over the whole grid (m = 4): sorted 0.01 0.03 0.04 1.0 → ×4 ×3 ×2 ×1, running max
    assert [rows[n]["p_holm"] for n in ("hybrid~k=10", "hybrid~k=25", "hybrid~k=60", "hybrid~k=90")] == pytest.approx(
        [0.04, 1.0, 0.09, 0.09]
    )
    assert block["chosen"] == "hybrid~k=90" and not block["chosen_is_base_setting"]
    assert block["best_on_test"] == "hybrid~k=60"
    assert block["confirmed"] is False  # its p_holm 0.09 is not below 0.05
    text = " ".join(verdict(block))
    assert "4 variants" in text and "`hybrid~k=60` scores best on test but was not chosen on dev" in text
    assert "not the winner" in text


def test_a_tie_on_dev_goes_to_the_base_setting():
    runs = grid_runs()[:3]  # k=10 and k=60 tie on dev at 0.5; the base setting (k=25) is lower
    block = whatif.analyse(M, "dev", BASE_RUN, runs, resamples=200)
    assert block["chosen"] == "hybrid~k=10"  # the first of the tied in grid order
    runs[1] = run("hybrid~k=25", BASE, dev=[1, 1, 0, 0], test=[1, 0, 1, 0, 0, 0, 0, 0])
    block = whatif.analyse(M, "dev", run("hybrid", BASE, [1, 1, 0, 0], [1, 0, 1, 0, 0, 0, 0, 0]), runs, resamples=200)
    assert block["chosen"] == "hybrid~k=25" and block["chosen_is_base_setting"]
    assert "no change is suggested" in " ".join(verdict(block))


def test_real_tests_and_intervals_come_from_stats():
    from vipune_eval.stages.report.compare import holm, paired_bootstrap_interval, paired_randomization

    block = whatif.analyse(M, "dev", BASE_RUN, grid_runs(), resamples=500)
    b = [1, 0, 1, 0, 0, 0, 0, 0]
    a = [1, 1, 1, 1, 1, 1, 1, 0]
    row = block["variants"][2]
    assert row["p"] == paired_randomization(a, b, resamples=500)
    assert row["interval"] == list(paired_bootstrap_interval(a, b, resamples=500))
    assert block["variants"][1]["p"] == 1.0  # the base's own setting: no difference
    assert [r["p_holm"] for r in block["variants"]] == list(
        holm({str(i): r["p"] for i, r in enumerate(block["variants"])}).values()
    )


def test_selecting_on_test_confirms_on_dev():
    block = whatif.analyse(M, "test", BASE_RUN, grid_runs(), resamples=100)
    assert block["chosen"] == "hybrid~k=60" and block["confirm_on"] == "dev"
    assert block["best_on_dev"] == "hybrid~k=90"


def test_no_pairs_on_the_selection_split_chooses_nothing_and_says_so(tmp_path):
    """Issue 32 item 2: on small data dev_fraction 0.2 gives 0 dev pairs (was a TypeError in
    verdict, and the report job's outputs were deleted)."""
    from vipune_eval.stages.report import markdown, plots
    from vipune_eval.stages.report.sections import lab

    base = run("hybrid", BASE, dev=[], test=[1, 0, 0])
    for grid in (
        [run("hybrid~k=10", {"k": 10}, [], [1, 0, 1]), run("hybrid~k=60", {"k": 60}, [], [1, 1, 1])],
        [run("hybrid~k=10", {"k": 10}, [], [1, 0, 1]), run("hybrid~k=25", BASE, [], [1, 0, 0])],
    ):
        block = whatif.analyse(M, "dev", base, grid, resamples=100)
        assert block["chosen"] is None and not block["chosen_is_base_setting"] and not block["confirmed"]
        text = " ".join(verdict(block))
        assert "no pairs on the dev split: nothing can be chosen" in text
        assert "no change is suggested" not in text and "scores best on test" not in text
        report = {"whatif": {**block, "grid": {"k": [10, 60]}}}
        assert "nothing can be chosen" in markdown.section(lab.whatif_section(report)[0])
        plots.whatif(report, tmp_path / "whatif.png")
        assert (tmp_path / "whatif.png").read_bytes()[:4] == b"\x89PNG"


def test_no_pairs_on_the_confirmation_split_confirms_nothing_and_says_so():
    base = run("hybrid", BASE, dev=[1, 0], test=[])
    block = whatif.analyse(
        M, "dev", base, [run("hybrid~k=10", {"k": 10}, [1, 1], []), run("hybrid~k=25", BASE, [1, 0], [])], resamples=100
    )
    assert block["chosen"] == "hybrid~k=10" and not block["confirmed"]
    text = " ".join(verdict(block))
    assert "no pairs on the test split: nothing can be confirmed" in text
    assert "not confirmed" not in text and "scores best on test" not in text
