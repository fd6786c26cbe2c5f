"""stages/report/sections/lab.py: the what-if lab's table and verdict."""

from __future__ import annotations

from vipune_eval.stages.report import whatif
from vipune_eval.stages.report.sections.lab import whatif_section

M = "recall_any@5"


def run(name, params, dev, test):
    per_query = {f"d{i}": {M: v, "split": "dev"} for i, v in enumerate(dev)}
    per_query |= {f"t{i}": {M: v, "split": "test"} for i, v in enumerate(test)}
    return {"name": name, "params": params, "run": f"results/runs/{name}.run", "per_query": per_query}


def test_the_variants_are_sorted_on_the_selection_split_with_the_chosen_one_and_the_base_setting_marked():
    base = run("hybrid", {"k": 25}, dev=[1, 0, 0, 0], test=[1, 0, 0, 0])
    grid = [
        run("hybrid~k=10", {"k": 10}, dev=[1, 1, 0, 0], test=[1, 0, 0, 0]),
        run("hybrid~k=25", {"k": 25}, dev=[1, 0, 0, 0], test=[1, 0, 0, 0]),
        run("hybrid~k=60", {"k": 60}, dev=[1, 1, 1, 0], test=[1, 1, 0, 0]),
    ]
    block = whatif.analyse(M, "dev", base, grid, resamples=100)
    [section] = whatif_section({"whatif": {**block, "grid": {"k": [10, 25, 60]}}})
    assert section.key == "whatif" and section.title.startswith("What-if lab: variants of `hybrid`, recall_any@5")
    verdict, table, note = section.blocks
    assert [row[0] for row in table.rows] == ["base `hybrid`", "hybrid~k=60", "hybrid~k=10", "hybrid~k=25"]
    assert table.rows[1][-1] == "chosen" and table.rows[3][-1] == "base setting"
    assert table.rows[1][1:4] == ["0.750", "0.500", "+25.0"]  # dev, test, test − base in points
    assert any("hybrid~k=60" in item.text for item in verdict.items)


def test_no_lab_no_section():
    assert whatif_section({}) == []
