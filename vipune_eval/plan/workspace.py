"""Parse-time set-up of a run: what the Snakefile needs before it can plan.

The three things a user changes are reduced to small fingerprint files, written only when their
text changes, so staleness follows content, not timestamps or paths: the dataset (its sha256),
the model (revision, file hashes, pooling) and every vipune build (sha256 of its bytes and
``--json version``). This module writes them, resolves the builds to compare, names every run
and writes the report's manifest. It is plain Python: ``prepare(config)`` can be called (and
tested) without Snakemake.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from vipune_eval.registry import datasets, granularities, measures, retrievers, views
from vipune_eval.core import paths
from vipune_eval.core import fingerprints
from vipune_eval.vipune import binary as vipune_binary
from vipune_eval.plan import whatif_grid
from vipune_eval.errors import BinaryNotFound, EvalError
from vipune_eval.core.io import read_json, write_json_if_changed
from vipune_eval.registry.views import View


@dataclass(frozen=True)
class Run:
    """One set of results of one retriever (per view): what the score stage merges."""

    name: str
    retriever: str
    binary: str | None = None  # fingerprint id, for the vipune lane
    spec: retrievers.Spec | None = None  # what a reference run runs (family setting or plugin)

    @property
    def lane(self) -> str:
        return "vipune" if self.binary is not None else "reference"

    @property
    def status_run(self) -> str | None:
        """Failed pairs and latencies live beside the hybrid run of the binary's shards."""
        return None if self.binary is None else paths.vipune_run(self.binary)


@dataclass
class Workspace:
    config: dict[str, Any]
    dataset_file: str
    model_dir: str
    views: list[View]
    primary: str | None                    # fingerprint id of vipune.binary ("missing": not found)
    builds: list[str]                      # fingerprint ids of vipune.compare (baseline included)
    baseline: str | None = None            # fingerprint id of vipune.baseline
    binaries: dict[str, str] = field(default_factory=dict)  # id → path of a build run here now
    fingerprints: dict[str, dict] = field(default_factory=dict)
    specs: list[retrievers.Spec] = field(default_factory=list)  # the checked retrievers entries
    notes: list[str] = field(default_factory=list)  # printed at parse time: what was not done
    lab: whatif_grid.Lab | None = None          # the what-if grid (primary view only)

    # ------------------------------------------------------------ names
    @property
    def retrievers(self) -> list[str]:
        return [s.name for s in self.specs]

    @property
    def reference(self) -> list[str]:
        return [s.name for s in retrievers.reference(self.specs)]

    def runs(self) -> dict[str, Run]:
        """Run name → Run, for every retriever of every build that is scored."""
        out: dict[str, Run] = {}
        for s in self.specs:
            if s.lane == "reference":
                out[s.name] = Run(s.name, s.name, spec=s)
            else:
                out[self.run_of(s.name)] = Run(self.run_of(s.name), s.name, self.primary)
        for build in self.builds:
            out.setdefault(paths.vipune_run(build), Run(paths.vipune_run(build), "vipune", build))
        if self.lab:
            for s in (self.lab.base, *self.lab.variants):
                out.setdefault(s.name, Run(s.name, s.name, spec=s))
        return out

    def run_of(self, retriever: str) -> str:
        """The run name of a configured retriever (the primary build for the vipune lane)."""
        spec = next(s for s in self.specs if s.name == retriever)
        if spec.lane == "reference":
            return retriever
        return paths.vipune_run(self.primary, semantic=spec.mirror["use"] == "dense")

    def view(self, folder: str) -> View:
        for view in self.views:
            if view.folder == folder:
                return view
        raise EvalError(f"no configured view has the folder {folder!r}")

    def binaries_to_search(self) -> list[str]:
        return ([self.primary] if self.primary else []) + [b for b in self.builds if b != self.primary]


def _binary(binary: str, config: dict[str, Any]) -> dict[str, Any]:
    path = vipune_binary.resolve_binary(binary)
    extra = [Path(os.path.expanduser(f)).resolve() for f in config["vipune"].get("fingerprint_files") or []]
    missing = [str(f) for f in extra if not f.is_file()]
    if missing:
        raise EvalError(f"vipune.fingerprint_files: {', '.join(missing)} not found")
    cache = Path(paths.CACHE)
    fingerprint = vipune_binary.binary_fingerprint(path, cache / "vipune-home", config["vipune"]["timeout"],
                                             cache, extra)
    write_json_if_changed(paths.binary_fingerprint(fingerprint["id"]), fingerprint)
    return {**fingerprint, "path": str(path)}


def _build(entry: str, config: dict[str, Any]) -> dict[str, Any]:
    """A vipune.compare entry: the fingerprint id of a build evaluated here before, or a binary."""
    known = paths.fingerprinted_binaries()
    if entry in known:
        return known[entry]
    try:
        return _binary(entry, config)
    except BinaryNotFound:
        raise EvalError(
            f"vipune.compare entry {entry!r} is neither an executable vipune nor the fingerprint "
            f"of a binary evaluated in this directory (known: {', '.join(sorted(known)) or 'none'})") from None


def check_config(config: dict[str, Any]) -> None:
    """What the schema cannot say, every bad value named at once, before any job runs."""
    problems = []
    if max(config["ks"]) > config["search_limit"]:
        problems.append(f"search_limit ({config['search_limit']}) must be at least the largest k "
                        f"({max(config['ks'])})")
    if config["search"]["row_limit"] < config["search_limit"]:
        problems.append(f"search.row_limit ({config['search']['row_limit']}) must be at least "
                        f"search_limit ({config['search_limit']})")
    problems += granularities.problems(config["granularities"])
    fraction = config["split"]["dev_fraction"]
    if not 0 <= fraction <= 1:  # the schema's bounds let NaN through
        problems.append(f"split.dev_fraction must be a number from 0 to 1, got {fraction!r}")
    if problems:
        raise EvalError("bad configuration: " + "; ".join(problems),
                        fix="fix these keys in your config file (docs/configuration.md)")


def prepare(config: dict[str, Any]) -> Workspace:
    """Check the configuration, write the fingerprints and the config, name the builds."""
    specs = retrievers.resolve(config["retrievers"])  # first: an unknown name stops here
    lab = whatif_grid.resolve(config.get("whatif"), specs, measures.keys(config["ks"], measures.SEED))
    clash = sorted({s.name for s in lab.variants} & {s.name for s in specs}) if lab else []
    if clash:
        raise EvalError(f"whatif: the variant names {clash} are taken by configured retrievers")
    check_config(config)
    config["dataset"] = datasets.resolve(config["dataset"])  # the rules read the resolved block
    if config["dataset"]["path"]:
        dataset_file = str(Path(os.path.expanduser(config["dataset"]["path"])).resolve())
        write_json_if_changed(paths.DATASET_FINGERPRINT, fingerprints.local_dataset_fingerprint(
            Path(dataset_file), config["dataset"]["sha256"], Path(paths.CACHE) / "sha256.json"))
    else:
        dataset_file = f"{paths.RESULTS}/data/download/{config['dataset']['filename']}"
    if config["model"]["path"]:
        model_dir = str(Path(os.path.expanduser(config["model"]["path"])).resolve())
        write_json_if_changed(paths.MODEL_FINGERPRINT, fingerprints.model_fingerprint(
            Path(model_dir), repo_id=config["model"]["repo_id"], revision=config["model"]["revision"],
            file=config["model"]["file"], pooling=config["model"]["pooling"],
            cache_file=Path(paths.CACHE) / "sha256.json"))
    else:
        model_dir = f"{paths.RESULTS}/model/download"
    workspace = Workspace(config=config, dataset_file=dataset_file, model_dir=model_dir,
                          views=views.configured(config), primary=None, builds=[], specs=specs,
                          lab=lab)
    if retrievers.uses_binary(specs):
        # A missing binary is reported by the vipune_missing rule, so dry runs and --lint still
        # work; a binary that is there but does not answer stops the run here, saying why.
        try:
            primary = _binary(config["vipune"]["binary"], config)
        except BinaryNotFound:
            workspace.primary = "missing"
        else:
            workspace.primary = primary["id"]
            workspace.binaries[primary["id"]] = primary["path"]
            workspace.fingerprints[primary["id"]] = primary
        entries = list(config["vipune"].get("compare") or [])
        if config["vipune"].get("baseline"):
            entries.append(config["vipune"]["baseline"])
        for entry in entries:
            build = _build(entry, config)
            if entry == config["vipune"].get("baseline"):
                workspace.baseline = build["id"]
            if build["id"] == workspace.primary:
                key = "vipune.baseline" if entry == config["vipune"].get("baseline") else "vipune.compare entry"
                workspace.notes.append(f"{key} {entry!r} is vipune.binary itself ({build['id']}); "
                                       "dropped: every build is compared with vipune.binary")
            elif build["id"] not in workspace.builds:
                workspace.builds.append(build["id"])
            workspace.fingerprints[build["id"]] = build
            if "path" in build:
                workspace.binaries[build["id"]] = build["path"]
        if config["vipune"]["preflight"] == "enforce":
            refuse_recorded_failures(workspace)
    write_json_if_changed(paths.CONFIG_JSON, config)
    return workspace


def refuse_recorded_failures(ws: Workspace) -> None:
    """``vipune.preflight`` is not a parameter of the preflight or the searches (both modes run
    the same checks; enforce stops at the first failure), so switching it reruns nothing. Enforce
    still holds for a build whose failed checks were recorded under ``record``: it is refused
    here, before any job, as its preflight job would have been."""
    refused = []
    for build in ws.binaries_to_search():
        path = Path(paths.preflight(build))
        found = read_json(path) if path.exists() else {}
        if found.get("failed_checks"):
            refused.append(f"{build} ({'; '.join(found.get('drift') or found['failed_checks'])})")
    if refused:
        raise EvalError(
            f"vipune.preflight is enforce, and the preflight of {', '.join(refused)} failed (recorded "
            "under vipune.preflight: record)",
            fix="set vipune.preflight: record to evaluate these builds anyway, their failed checks "
                "named in the report; or drop them from vipune.compare")


def job_environment() -> dict[str, str]:
    """Caches the stages' libraries would put under HOME (onnxruntime's device id under
    $XDG_CACHE_HOME, matplotlib's font cache) go under results/.cache instead: a run writes
    nothing of its own under the user's HOME."""
    cache = Path(paths.CACHE).resolve()
    return {"XDG_CACHE_HOME": str(cache / "xdg"), "MPLCONFIGDIR": str(cache / "matplotlib")}


# ---------------------------------------------------------------- one run per directory


def hold_lock(results: Path = Path(paths.RESULTS)) -> TextIO:
    """An OS lock on ``results/.lock`` for as long as this process lives (a ``kill -9`` releases
    it with the process); refuses at once when another run holds it, naming that run's PID."""
    results.mkdir(parents=True, exist_ok=True)
    handle = open(results / ".lock", "a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        other = handle.read().strip() or "unknown"
        handle.close()
        raise EvalError(f"{results.resolve()}: another run (PID {other}) is working in this "
                        "directory — wait for it to finish, or stop it; two runs at once would "
                        "delete each other's fresh outputs") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def clear_tmp(results: Path = Path(paths.RESULTS)) -> None:
    """What a killed run left behind: its scratch folders and the half-written files of
    io.atomic_path (only with the lock held: no job is running)."""
    shutil.rmtree(results / "tmp", ignore_errors=True)
    for stale in results.rglob(".*.tmp"):
        if stale.is_file():
            stale.unlink(missing_ok=True)


# ---------------------------------------------------------------- files of the plan


def embed_shards(ws: Workspace, view: View) -> list[str]:
    n = ws.config["embed"]["shards"]
    return [paths.fill(paths.EMBED_SHARD, view=view.folder, shard=i, shards=n) for i in range(n)]


def arms_shards(ws: Workspace, view: View) -> list[str]:
    n = ws.config["search"]["shards"]
    return [paths.fill(paths.ARMS_SHARD, view=view.folder, shard=i, shards=n) for i in range(n)]


def plugin_source_digest(spec: retrievers.Spec) -> str:
    from vipune_eval.stages.search import plugin as plugins

    return plugins.source_digest(spec.use)


def run_shards(ws: Workspace, view: View, run: Run) -> list[str]:
    n = ws.config["search"]["shards"]
    return [paths.fill(paths.SEARCH_SHARD, view=view.folder, run=run.name, shard=i, shards=n) for i in range(n)]


def status_shards(ws: Workspace, view: View, run: Run) -> list[str]:
    if run.status_run is None:
        return []
    n = ws.config["search"]["shards"]
    return [paths.fill(paths.STATUS_SHARD, view=view.folder, run=run.status_run, shard=i, shards=n)
            for i in range(n)]


def metrics_file(view: View, run: str) -> str:
    return paths.fill(paths.METRICS, view=view.folder, run=run)


def filter_file(view: View, name: str) -> str:
    return paths.fill(paths.FILTER, view=view.folder, name=name)


def report_manifest(ws: Workspace) -> dict[str, Any]:
    """Every input of the report, with the structure it needs (views, runs, builds)."""
    entries = []
    for view in ws.views:
        entries.append({
            "name": view.name, "folder": view.folder, "protocol": view.protocol,
            "granularity": view.granularity, "description": view.description(),
            "ks": view.ks(ws.config), "measures": list(view.measure_names()),
            "summary": filter_file(view, "summary.json"), "qrels": filter_file(view, "qrels.txt"),
            "pairs": filter_file(view, "pairs.parquet"), "rows": filter_file(view, "rows.parquet"),
            "embeddings": embed_shards(ws, view),
            "metrics": {r: metrics_file(view, ws.run_of(r)) for r in ws.retrievers},
            "builds": ({b: metrics_file(view, paths.vipune_run(b)) for b in ws.builds}
                       if view == views.PRIMARY else {}),
        })
    binary = [ws.primary, *ws.builds] if ws.primary else []
    return {
        "config": paths.CONFIG_JSON, "dataset_fp": paths.DATASET_FINGERPRINT,
        "model_fp": paths.MODEL_FINGERPRINT, "retrievers": ws.retrievers,
        "corpus": datasets.corpus(ws.config["dataset"]),
        # each vipune-lane retriever → the configured reference run with the setting it mirrors
        "settings": {s.name: s.setting() for s in ws.specs},  # what each retriever ran
        "roles": retrievers.roles(ws.specs),
        "mirrors": {s.name: retrievers.mirror_of(s, ws.specs) for s in ws.specs if s.lane == "vipune"},
        "primary": ws.primary, "builds": ws.builds,
        "baseline": ws.baseline,
        "fingerprints": {b: paths.binary_fingerprint(b) for b in binary},
        # a build named by id alone keeps the preflight it had when it was evaluated here
        "preflight": {b: paths.preflight(b) for b in binary
                      if b in ws.binaries or b == ws.primary or Path(paths.preflight(b)).exists()},
        "views": entries,
        "whatif": whatif_manifest(ws),
    }


def whatif_manifest(ws: Workspace) -> dict[str, Any] | None:
    """The what-if grid's runs, scored in the primary view only."""
    lab = ws.lab
    if not lab:
        return None

    def entry(s: retrievers.Spec) -> dict[str, Any]:
        return {"name": s.name, "params": s.params, "metrics": metrics_file(views.PRIMARY, s.name),
                "run": paths.fill(paths.RUN, view=views.PRIMARY.folder, run=s.name)}

    return {"measure": lab.measure, "select_on": lab.select_on, "grid": lab.grid,
            "base": entry(lab.base), "variants": [entry(s) for s in lab.variants]}


def manifest_files(manifest: dict[str, Any]) -> list[str]:
    """Every file the report reads (the report rule's inputs), but the config: it holds
    machine-specific paths, and moving a file must not rerun anything (what the config changes
    that matters reaches the report through these inputs)."""
    files = [manifest["dataset_fp"], manifest["model_fp"],
             *manifest["fingerprints"].values()]
    files += manifest["preflight"].values()
    for view in manifest["views"]:
        files += [view["summary"], view["qrels"], view["pairs"], view["rows"], *view["embeddings"],
                  *view["metrics"].values(), *view["builds"].values()]
    lab = manifest.get("whatif")
    if lab:
        files += [lab["base"]["metrics"], *(v["metrics"] for v in lab["variants"])]
    return list(dict.fromkeys(files))
