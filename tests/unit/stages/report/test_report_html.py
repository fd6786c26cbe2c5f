"""stages/report/report_html.py (report-html): Snakemake's HTML report of a finished run, built from
the run's own config (the build itself runs Snakemake: tests/workflow/test_workflow.py)."""

from __future__ import annotations

import pytest

from vipune_eval.core import paths
from vipune_eval.errors import EvalError
from vipune_eval.stages.report.report_html import SNAKEFILE, command, run_report_html


def test_the_report_is_planned_from_the_runs_own_config(tmp_path):
    cmd = command(SNAKEFILE, tmp_path)
    assert cmd[cmd.index("--configfile") + 1] == str(tmp_path / paths.CONFIG_JSON)
    assert cmd[cmd.index("--report") + 1] == paths.REPORT_HTML and cmd[cmd.index("-s") + 1] == str(SNAKEFILE)


def test_a_folder_without_a_finished_run_is_named_with_what_is_missing_and_the_fix(tmp_path):
    with pytest.raises(EvalError) as refused:
        run_report_html(tmp_path)
    assert str(tmp_path.resolve()) in refused.value.message and paths.CONFIG_JSON in refused.value.message
    assert "run the workflow there first" in refused.value.fix


def test_a_missing_snakefile_is_named(tmp_path):
    with pytest.raises(EvalError, match="no Snakefile at"):
        run_report_html(tmp_path, tmp_path / "Snakefile")
