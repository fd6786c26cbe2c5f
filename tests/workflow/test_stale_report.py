"""A run never ends on a report its runs were not made for (issue 51 items 4 and 6): a run of part
of the workflow names the summary as an earlier run's, and a report whose runs were made with
other settings (--rerun-triggers mtime) names them with the fix instead of stating what they
were not made with."""

import pytest

from support.scenarios import clone, snakemake

pytestmark = pytest.mark.slow


def test_a_run_until_score_does_not_end_on_the_previous_runs_summary(small_run, workflow_env, tmp_path):
    workdir = clone(small_run, tmp_path / "until")
    summary = (workdir / "results/summary.txt").read_text()
    proc = snakemake(workdir, "--cores", "2", "--until", "score", "--forcerun", "score", env=workflow_env)
    out = proc.stdout + proc.stderr
    assert "recall@k: the share of a pair's gold sessions" not in out  # the old summary's numbers
    assert proc.stdout.rstrip().endswith(
        "vipune-eval: this run did not rebuild the report: results/summary.txt and the reports are an earlier "
        "run's; run snakemake without --until, --omit-from or targets to bring them up to date"
    )
    assert (workdir / "results/summary.txt").read_text() == summary
    proc = snakemake(workdir, "--cores", "2", "--forcerun", "report", env=workflow_env)
    assert "recall@k: the share of a pair's gold sessions" in proc.stdout  # a rebuilt report's summary


@pytest.mark.parametrize("setting", ["search_limit=20", "ks=[1, 5, 20]"])
def test_a_setting_changed_under_mtime_triggers_names_the_stale_runs_not_a_wrong_report(
    small_run, workflow_env, tmp_path, setting
):
    """With --rerun-triggers mtime a changed search_limit reran only the report, which stated limit
    20 for runs made at 10, and a changed ks crashed it with KeyError: 'recall@20'. The report's
    manifest states the settings, so the run is refused before any job (issue 53: a planned file's
    new text that rerun triggers without params cannot see); the report's own check of each run's
    recorded settings (stages.report.report.stale_runs, its unit tests in test_report.py) stays
    behind it, for runs made before the manifest was a planned file."""
    workdir = clone(small_run, tmp_path / "mtime")
    report = (workdir / "results/report.json").read_text()
    logs = {log: log.read_bytes() for log in (workdir / "results/logs").rglob("*.log")}
    proc = snakemake(
        workdir,
        "--cores",
        "2",
        "--rerun-triggers",
        "mtime",
        "--config",
        setting,
        "search_limit=20",
        env=workflow_env,
        check=False,
    )
    assert proc.returncode != 0 and "KeyError" not in proc.stderr and "Traceback" not in proc.stderr
    assert "results/report-inputs.json changed" in proc.stderr and "rerun triggers without `params`" in proc.stderr
    assert "run once without --rerun-triggers" in proc.stderr
    assert {log: log.read_bytes() for log in logs} == logs  # refused before any job
    written = workdir / "results/report.json"  # no report states limit 20 for runs made at 10 (the failed
    assert not written.exists() or written.read_text() == report  # job's outputs are removed by Snakemake)
    snakemake(workdir, "--cores", "2", "--config", setting, "search_limit=20", env=workflow_env)  # the fix
    import json

    stated = json.loads((workdir / "results/report.json").read_text())["views"]["session"]["scored_with"]
    assert (
        stated["ranking_settings"]["limit"] == 20
        and json.loads((workdir / "results/metrics/hybrid.json").read_text())["scored_with"] == stated
    )
