"""The what-if lab through the Snakemake CLI: a grown grid computes only its new variants."""

import json

import yaml

from support.scenarios import make_workdir, planned, snakemake


def test_growing_the_grid_computes_only_the_new_variants(tmp_path, workflow_env, scenario_inputs):
    workdir = make_workdir(tmp_path / "run", *scenario_inputs("whatif"), scenario="whatif")
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    snakemake(workdir, "--cores", "2", env=workflow_env)
    first = ["hybrid~k=10~query=and", "hybrid~k=25~query=and"]
    files = [
        p
        for name in first
        for p in [workdir / "results/runs" / f"{name}.run", *(workdir / "results/search" / name).glob("*.run")]
    ]
    assert len(files) == 6
    mtimes = {p: p.stat().st_mtime_ns for p in files}

    config["whatif"]["grid"] = {"k": [10, 25, 60], "query": ["and", "or"]}
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    plan = planned(workdir, workflow_env)
    assert plan == {
        "fuse_reference": 4,
        "score": 4,
        "planned_text": 1,
        "planned_file": 1,  # the manifest: new points
        "report": 1,
        "plots": 1,
        "report_page": 1,
        "all": 1,
    }
    snakemake(workdir, "--cores", "2", env=workflow_env)
    assert {p: p.stat().st_mtime_ns for p in files} == mtimes

    report = json.loads((workdir / "results/report.json").read_text())
    block = report["whatif"]
    assert block["tried"] == 6 and block["measure"] == "recall_any@5" and block["select_on"] == "dev"
    assert block["base"]["name"] == "hybrid" and block["base"]["params"]["k"] == 25
    same = next(v for v in block["variants"] if v["name"] == "hybrid~k=25~query=and")
    assert same["dev"] == block["base"]["dev"] and same["test_delta"] == 0 and same["p"] == 1
    assert block["chosen"] in {v["name"] for v in block["variants"]}
    assert all(v["run"] == f"results/runs/{v['name']}.run" for v in block["variants"])
    assert all(
        set(v) >= {"name", "params", "run", "dev", "test", "test_delta", "p", "p_holm", "interval"}
        for v in block["variants"]
    )
    md = (workdir / "results/report.md").read_text()
    assert "## What-if lab" in md and md.count("| hybrid~k=") == 6
    assert (workdir / "results/plots/whatif.png").read_bytes()[:4] == b"\x89PNG"
