"""The whole document, every section in its order (``document``): the warnings first, then the
builds, the primary view's numbers, the other views, the lab, the diagnostics, the explanations,
the embed throughput and the notes; and what the summary and the HTML report's first page show of it (what
was scored, the headline, each build's difference, where the files are).

A new table or section is one function in the module of what it draws, listed in ``document``'s
``sections``, plus its test (tests/unit/stages/report/sections/); the renderers need no change.
"""

from __future__ import annotations

from vipune_eval.core import paths
from vipune_eval.stages.report.document import Bullets, Document, Item, Section
from vipune_eval.stages.report.report_json import Report
from vipune_eval.stages.report.sections import (
    by_view,
    explanations,
    lab,
    misses,
    overall,
    provenance,
    throughput,
    vipune_builds,
)
from vipune_eval.stages.report.sections.warnings import warnings

# Where a run's files are: (path, what it holds), in the order a person opens them.
FILES = (
    (paths.REPORT_MD, "every table: per category, dev/test, comparisons, diagnostics"),
    (paths.REPORT_HTML, "the HTML report: these numbers first, then every table with its plot"),
    (paths.REPORT_JSON, "every number, interval and the provenance, for scripts"),
)


def document(report: Report) -> Document:
    """Every section of the report, built once."""
    table = overall.headline(report)
    warned = warnings(report, table)
    sections = [  # the warnings first: report.md's first lines after what was scored
        *([Section("warnings", "Warnings", [Bullets(list(map(Item, warned)))])] if warned else []),
        *vipune_builds.builds_section(report),
        *overall.overall_section(report),
        *overall.per_category_sections(report),
        *overall.split_section(report),
        *overall.comparisons_section(report),
        *by_view.granularities_section(report),
        *lab.whatif_section(report),
        *by_view.official_sections(report),
        *misses.diagnostics_sections(report),
        *explanations.explanations_sections(report),
        throughput.embed_section(report),
        *overall.notes_section(report),
    ]
    builds = report["builds"]
    return Document(
        title="vipune-eval report",
        pairs=report["pairs"],
        protocol=report["protocol"],
        scored=provenance.scored(report),
        identity=provenance.identity(report),
        warnings=warned,
        headline=table,
        primary_build=builds[0]["id"] if builds else None,
        primary_source=(builds[0].get("source") or "vipune.binary") if builds else None,
        builds=vipune_builds.build_lines(report),
        sections=sections,
    )
