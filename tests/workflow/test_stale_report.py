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
        "run's; run snakemake without --until, --omit-from or targets to bring them up to date")
    assert (workdir / "results/summary.txt").read_text() == summary
    proc = snakemake(workdir, "--cores", "2", "--forcerun", "report", env=workflow_env)
    assert "recall@k: the share of a pair's gold sessions" in proc.stdout  # a rebuilt report's summary
