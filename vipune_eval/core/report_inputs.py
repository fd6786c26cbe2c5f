"""The report's manifest, results/report-inputs.json: every input of the report and where it lives.

Its shape, shared by its writer (plan.manifest, at parse time) and its reader
(stages.report.report's ``load``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from vipune_eval.core.paths import RESULTS
from vipune_eval.core.ranking_settings import RankingRecord


def under(run: Path, path: str) -> Path:
    """A results path (``results/...``, as core.paths and the manifest write them) in the results
    folder ``run`` of a finished run (wherever it was copied: `vipune-eval explain` and the gate read one)."""
    return Path(run) / Path(path).relative_to(RESULTS)


class LabRun(TypedDict):
    name: str
    params: dict[str, Any]
    metrics: str  # its metrics file (primary view)
    run: str  # its merged run file


class LabManifest(TypedDict):
    measure: str
    select_on: str
    grid: dict[str, list[Any]]
    base: LabRun
    variants: list[LabRun]


class ScoredWith(TypedDict):
    """What every run of a view must be scored and searched with: stages.score.Scoring's fields, as
    its metrics record them and the manifest states them (plan.manifest.scored_with)."""

    ks: list[int]
    measure_names: list[str]
    ranking_settings: RankingRecord
    turn_to_session: bool


class ManifestView(TypedDict):
    """One view's entry: what it is and where each of its inputs lives under results/."""

    name: str
    folder: str
    protocol: str
    granularity: str
    description: str
    ks: list[int]
    measures: list[str]
    scored_with: ScoredWith  # what its runs must be scored and searched with
    summary: str
    qrels: str
    pairs: str
    rows: str
    texts: str
    embeddings: list[str]
    metrics: dict[str, str]  # configured retriever → its metrics file
    builds: dict[str, str]  # vipune.compare build id → its metrics file (primary view only)


class ExplainedBuild(TypedDict):
    """A vipune build as an explanation shows it (stages.report.explain): the metrics files of its
    binary's hybrid run and of its lib lane's (primary view; None where it has no such run), and
    the arms files of its lib lane's run (none without one)."""

    build: str
    binary: str | None
    lib: str | None
    arms: list[str]


class Corpus(TypedDict):
    """The data scored: its preset and release, its file and pins (registry.datasets.corpus writes
    it, report.json holds it as ``corpus``)."""

    preset: str | None
    release: str
    repo_id: str | None
    filename: str
    revision: str | None
    sha256: str | None
    local_path: bool
    source: str
    same_as_paper: bool
    note: str


class Manifest(TypedDict):
    """results/report-inputs.json: every input of the report."""

    config: str
    dataset_fp: str
    model_fp: str
    retrievers: list[str]
    corpus: Corpus | None
    settings: dict[str, dict[str, Any]]
    roles: dict[str, str | None]
    mirrors: dict[str, str | None]
    primary: str | None
    lanes: dict[str, str]  # build id → the fingerprint file of its vipune-lane (the lib lane's runs)
    builds: list[str]
    compared_on: str | None  # the retriever the builds are compared by (vipune or vipune-lib), or none
    baseline: str | None
    sources: str  # paths.BUILD_SOURCES: build id → where it came from (not an input of the report)
    fingerprints: dict[str, str]
    preflight: dict[str, str]
    views: list[ManifestView]
    searched_by: dict[str, list[str]]  # each scored run → the rules that search it
    whatif: LabManifest | None
    explained: list[ExplainedBuild]  # the builds an explanation sets side by side, the primary first
