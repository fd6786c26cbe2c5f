"""report-html: Snakemake's HTML report of a finished run, built from the run's own config.

``snakemake --report`` plans the workflow again from the config it is given: typed without the
run's ``--configfile`` it reports on the default config, with jobs that never ran. The run's
config as the workflow resolved it is in results/config.json, so the report is built from that.
A finished run writes it at its end (the workflow's ``onsuccess``, from the run's own workflow
object: ``build_after_run``); ``vipune-eval report-html`` builds it again in a Snakemake process
of its own, e.g. after the run's files were copied elsewhere.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from vipune_eval.core import paths
from vipune_eval.errors import EvalError

LOG = f"{paths.RESULTS}/logs/report_html.log"
SNAKEFILE = Path(__file__).resolve().parents[3] / "workflow" / "Snakefile"  # the workflow this package belongs to


def command(snakefile: Path, directory: Path) -> list[str]:
    """The Snakemake command line that builds results/report.html in ``directory``."""
    return [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(snakefile),
        "--directory",
        str(directory),
        "--configfile",
        str(directory / paths.CONFIG_JSON),
        "--report",
        paths.REPORT_HTML,
    ]


def build(snakefile: Path, directory: Path) -> str | None:
    """Build the HTML report; None when it was built, else why not (its last log line)."""
    log = directory / LOG
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.run(command(snakefile, directory), stdout=out, stderr=subprocess.STDOUT, text=True)
    if proc.returncode == 0:
        return None
    lines = [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    return f"{lines[-1] if lines else 'snakemake --report failed'} (the whole output: {log})"


def build_after_run(workflow: Any) -> str | None:
    """Build results/report.html from a finished run's own workflow object, as Snakemake's
    ``--report-after-run`` does: the run's config and DAG, without a second Snakemake start
    (~2 s of CPU at the end of every run). Snakemake's lines go to LOG, not the terminal; None
    when it was built, else why not. A run of part of the workflow (targets, --until,
    --omit-from, --allowed-rules, --batch) has a DAG of that part only: its report is planned
    again for the whole workflow, in a process of its own (``build``)."""
    import logging

    from snakemake.report.html_reporter import ReportSettings
    from snakemake.settings.types import GlobalReportSettings
    from snakemake_interface_report_plugins.registry import ReportPluginRegistry

    part = workflow.dag_settings
    if any((part.targets, part.target_jobs, part.until, part.omit_from, part.allowed_rules, part.batch)):
        return build(Path(workflow.main_snakefile), Path("."))
    log = Path(LOG)
    log.parent.mkdir(parents=True, exist_ok=True)
    snakemake_log = logging.getLogger("snakemake.logging")
    shown, propagate = snakemake_log.handlers[:], snakemake_log.propagate
    with open(log, "w", encoding="utf-8") as out:
        handler = logging.StreamHandler(out)
        snakemake_log.handlers, snakemake_log.propagate = [handler], False
        try:
            workflow.create_report(
                report_plugin=ReportPluginRegistry().get_plugin("html"),
                report_settings=ReportSettings(path=Path(paths.REPORT_HTML)),
                global_report_settings=GlobalReportSettings(),
            )
        except Exception as exc:  # Snakemake's own errors have no common base: any of them is why
            out.write(f"{type(exc).__name__}: {exc}\n")
            return f"{type(exc).__name__}: {exc} (the whole output: {log})"
        finally:
            handler.flush()
            snakemake_log.handlers, snakemake_log.propagate = shown, propagate
    return None


def run_report_html(directory: Path, snakefile: Path | None = None) -> None:
    snakefile = snakefile or SNAKEFILE
    if not snakefile.is_file():
        raise EvalError(f"no Snakefile at {snakefile}", fix="give the workflow's Snakefile with --snakefile")
    missing = [p for p in (paths.CONFIG_JSON, paths.REPORT_FRONT) if not (directory / p).is_file()]
    if missing:
        raise EvalError(
            f"{directory.resolve()} holds no finished run ({', '.join(missing)} missing)",
            fix="run the workflow there first (snakemake --cores N), or give its folder with --directory",
        )
    why = build(snakefile, directory)
    if why:
        raise EvalError(f"the HTML report was not built: {why}")
    print(f"vipune-eval: {directory / paths.REPORT_HTML}")
