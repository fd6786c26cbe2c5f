"""Plugin retrievers through the Snakemake CLI: an edit of the plugin file reruns its searches and
what depends on them only (the plugin's own tests: tests/unit/stages/search/test_plugin.py)."""

import yaml

from support.plugins import PLUGIN
from support.scenarios import make_workdir, planned, snakemake


def test_editing_a_plugin_reruns_only_its_searches(tmp_path, workflow_env, scenario_inputs):
    workdir = make_workdir(tmp_path / "run", *scenario_inputs("plugins"), scenario="plugins")
    (workdir / "mine").mkdir()
    (workdir / "mine" / "plug.py").write_text(PLUGIN)
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    snakemake(workdir, "--cores", "2", env=workflow_env)
    report = (workdir / "results/report.json").read_text()
    assert '"newest"' in report and '"h60"' in report

    (workdir / "mine" / "plug.py").write_text(PLUGIN + "\n# a comment changes the bytes\n")
    assert planned(workdir, workflow_env) == {
        "search_plugin": 2,
        "score": 1,
        "report": 1,
        "plots": 1,
        "report_page": 1,
        "all": 1,
    }
    summary = snakemake(workdir, "--summary", env=workflow_env).stdout
    stale = {
        line.split("\t")[0]
        for line in summary.splitlines()[1:]
        if line.split("\t")[-1:] != ["-"] and "\t" in line and line.split("\t")[-1] != "no update"
    }
    assert any("/search/newest/" in f for f in stale)
    assert not any(f"/search/{r}/" in f for f in stale for r in ("dense", "hybrid", "h60"))
    assert not any("embed" in f or "filter" in f for f in stale)

    config["retrievers"][2]["k"] = 61
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    assert planned(workdir, workflow_env) == {  # planned_file: the manifest names the new setting
        "fuse_reference": 1,
        "search_plugin": 2,
        "score": 2,
        "planned_text": 1,
        "planned_file": 1,
        "report": 1,
        "plots": 1,
        "report_page": 1,
        "all": 1,
    }

    (workdir / "mine" / "plug.py").write_text("def newest_first(:\n")
    proc = snakemake(workdir, "-n", env=workflow_env, check=False)
    assert proc.returncode != 0 and "mine/plug.py:newest_first" in proc.stderr + proc.stdout
