"""The report's manifest, computed at parse time (the run writes it: plan.planned_file): every input
of the report, with the structure it needs (views, runs, builds) and the roles of the configured
runs (which one mirrors vipune, which ones the diagnostics compare); its shape is core.report_inputs's,
and the report rule's inputs are its files (``manifest_files``). Parse time only: an edit here
reruns only what the manifest it makes changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vipune_eval.core import paths
from vipune_eval.core.report_inputs import ExplainedBuild, LabManifest, LabRun, Manifest, ManifestView, ScoredWith
from vipune_eval.plan.builds import compared_on
from vipune_eval.plan.workspace import SEARCHES, Workspace
from vipune_eval.registry import datasets, retrievers, views
from vipune_eval.registry.lanes import BINARY, LIB
from vipune_eval.registry.retrievers import Kind
from vipune_eval.registry.views import View
from vipune_eval.vipune.binary import MISSING

# ---------------------------------------------------------------- the configured runs' roles


def configured_with(setting: dict[str, Any], specs: list[retrievers.Spec]) -> str | None:
    """The first configured reference retriever with this family setting (defaults filled in)."""
    setting = dict(setting)
    family = setting.pop("use")
    full = {"use": family, **retrievers.family_params(family, setting, "setting")}
    return next((s.name for s in specs if s.family and s.setting() == full), None)


def mirror_of(binary: retrievers.Spec, specs: list[retrievers.Spec]) -> str | None:
    """The configured reference retriever whose family setting mirrors a vipune-lane one (None: none
    configured, or a retriever that mirrors no setting)."""
    return configured_with(binary.mirror, specs) if binary.mirror is not None else None


# The settings the report's diagnostics compare (how often vipune's AND query finds nothing and
# what an OR query changes in the fusion), found among the configured runs whatever their names.
ROLES = {"bm25_and": {"use": "bm25"}, "hybrid_and": {"use": "hybrid"}, "hybrid_or": {"use": "hybrid", "query": "or"}}


def roles(specs: list[retrievers.Spec]) -> dict[str, str | None]:
    return {role: configured_with(setting, specs) for role, setting in ROLES.items()}


# ---------------------------------------------------------------- the manifest


def _metrics(view: View, run: str) -> str:
    return paths.fill(paths.METRICS, view=view.folder, run=run)


def _filtered(view: View, name: str) -> str:
    return paths.fill(paths.FILTER, view=view.folder, name=name)


def scored_with(view: View, config: dict[str, Any]) -> ScoredWith:
    """What the view's score jobs are told (common.smk's score_options: the view's ks and
    measures, and what its searches rank to, View.ranking_settings), as stages.score.Scoring's
    fields: the metrics record theirs, and the report checks each run against this."""
    return {
        "ks": view.ks(config),
        "measure_names": list(view.measure_names()),
        "ranking_settings": view.ranking_settings(config).record(),
        "turn_to_session": view.turn_level_run,
    }


def searched_by(ws: Workspace) -> dict[str, list[str]]:
    """Each scored run → the rules that search it (what ``--forcerun`` names to make it again)."""
    return {
        run.name: [*(["search_arms"] if run.kind is Kind.ARMS else []), SEARCHES[run.kind].rule]
        for _, run in ws.scored()
    }


def report_manifest(ws: Workspace) -> Manifest:
    """Every input of the report, with the structure it needs (views, runs, builds)."""
    builds = ws.builds
    entries: list[ManifestView] = []
    for view in ws.views:
        entries.append(
            {
                "name": view.name,
                "folder": view.folder,
                "protocol": view.protocol,
                "granularity": view.granularity,
                "description": view.description(),
                "ks": view.ks(ws.config),
                "measures": list(view.measure_names()),
                "scored_with": scored_with(view, ws.config),
                "summary": _filtered(view, "summary.json"),
                "qrels": _filtered(view, "qrels.txt"),
                "pairs": _filtered(view, "pairs.parquet"),
                "rows": _filtered(view, "rows.parquet"),
                "texts": _filtered(view, "texts.parquet"),
                "embeddings": ws.embed_shards(view),
                "metrics": {r: _metrics(view, ws.run_of(r)) for r in ws.retrievers},
                "builds": (
                    {b: _metrics(view, ws.compared_run(b).name) for b in builds.compared}
                    if view == views.PRIMARY
                    else {}
                ),
            }
        )
    binary = builds.evaluated
    return {
        "config": paths.CONFIG_JSON,
        "dataset_fp": paths.DATASET_FINGERPRINT,
        "model_fp": paths.MODEL_FINGERPRINT,
        "retrievers": ws.retrievers,
        "corpus": datasets.corpus(ws.config["dataset"], ws.local_sha256),
        # each vipune-lane retriever → the configured reference run with the setting it mirrors
        "settings": {s.name: s.setting() for s in ws.specs},  # what each retriever ran
        "roles": roles(ws.specs),
        "mirrors": {s.name: mirror_of(s, ws.specs) for s in ws.specs if not s.reference},
        "primary": builds.primary,
        "builds": list(builds.compared),
        # the retriever that compares the builds: the binary's hybrid search, or the lib lane's
        "compared_on": {Kind.VIPUNE: BINARY.hybrid, Kind.LIB: LIB.hybrid, None: None}[compared_on(ws.specs)],
        # each build's vipune-lane (the lib lane's runs): vipune.binary's, and a compared build's in the loop
        "lanes": {b: paths.lane_fingerprint_file(lane) for b, lane in builds.lanes.items() if lane != MISSING},
        "baseline": builds.baseline,
        "sources": paths.BUILD_SOURCES,
        "fingerprints": {b: builds.fingerprint_file(b) for b in binary},
        # a build named by id alone keeps the preflight it had when it was evaluated here; the
        # preflight checks the binary's search and model, so a run of the lib lane alone has none
        "preflight": (
            {
                b: paths.preflight(b)
                for b in binary
                if b in builds.paths or b == builds.primary or Path(paths.preflight(b)).exists()
            }
            if any(s.kind is Kind.VIPUNE for s in ws.specs)
            else {}
        ),
        "views": entries,
        "searched_by": searched_by(ws),
        "whatif": whatif_manifest(ws),
        "explained": explained_builds(ws),
    }


def explained_builds(ws: Workspace) -> list[ExplainedBuild]:
    """Each build an explanation sets side by side, the primary first (none when no retriever
    runs vipune's code): its binary's and its lib lane's runs in the primary view, where it has
    them, and the lib lane's arms files."""
    builds = ws.builds
    if not builds.primary:
        return []
    runs, primary = ws.runs(), views.PRIMARY

    def entry(build: str, binary: str | None, lib: str | None) -> ExplainedBuild:
        return {
            "build": build,
            "binary": binary and _metrics(primary, binary),
            "lib": lib and _metrics(primary, lib),
            "arms": ws.lane_arms_shards(primary, runs[lib]) if lib else [],
        }

    names = {s.name for s in ws.specs}
    out = [
        entry(
            builds.primary,
            ws.run_of(BINARY.hybrid) if BINARY.hybrid in names else None,
            ws.run_of(LIB.hybrid) if LIB.hybrid in names else None,
        )
    ]
    for build in builds.compared:
        run = ws.compared_run(build)
        out.append(entry(build, None if run.lane else run.name, run.name if run.lane else None))
    return out


def whatif_manifest(ws: Workspace) -> LabManifest | None:
    """The what-if grid's runs, scored in the primary view only."""
    lab = ws.lab
    if not lab:
        return None

    def entry(s: retrievers.Spec) -> LabRun:
        return {
            "name": s.name,
            "params": s.params,
            "metrics": _metrics(views.PRIMARY, s.name),
            "run": paths.fill(paths.RUN, view=views.PRIMARY.folder, run=s.name),
        }

    return {
        "measure": lab.measure,
        "select_on": lab.select_on,
        "grid": lab.grid,
        "base": entry(lab.base),
        "variants": [entry(s) for s in lab.variants],
    }


def manifest_files(manifest: Manifest) -> list[str]:
    """Every file the report reads (the report rule's inputs), but the config: it holds
    machine-specific paths, and moving a file must not rerun anything (what the config changes
    that matters reaches the report through these inputs)."""
    files = [manifest["dataset_fp"], manifest["model_fp"], *manifest["fingerprints"].values()]
    files += manifest["lanes"].values()
    files += manifest["preflight"].values()
    for view in manifest["views"]:
        files += [
            view["summary"],
            view["qrels"],
            view["pairs"],
            view["rows"],
            *view["embeddings"],
            *view["metrics"].values(),
            *view["builds"].values(),
        ]
    lab = manifest.get("whatif")
    if lab:
        files += [lab["base"]["metrics"], *(v["metrics"] for v in lab["variants"])]
    if manifest.get("explained"):  # the explanations: the arms and the sessions' texts
        files += [path for build in manifest["explained"] for path in build["arms"]]
        files.append(manifest["views"][0]["texts"])
    return list(dict.fromkeys(files))
