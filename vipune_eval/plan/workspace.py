"""Parse-time set-up of a run: what the Snakefile needs before it can plan.

The three things a user changes are reduced to small fingerprint files, written only when their
text changes, so staleness follows content, not timestamps or paths: the dataset (its sha256),
the model (revision, file hashes, pooling) and every vipune build (sha256 of its bytes and
``--json version``). This module writes them, resolves the builds to compare, names every run
and writes the report's manifest. It is plain Python: ``prepare(config)`` can be called (and
tested) without Snakemake.
"""

from __future__ import annotations

import copy
import difflib
import fcntl
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypedDict

import jsonschema

from vipune_eval.registry import datasets, granularities, measures, retrievers, views
from vipune_eval.core import paths
from vipune_eval.core import fingerprints
from vipune_eval.vipune import binary as vipune_binary
from vipune_eval.vipune import lane as vipune_lane
from vipune_eval.plan import whatif_grid
from vipune_eval.errors import BinaryNotFound, EvalError
from vipune_eval.core.io import read_json, write_json_if_changed
from vipune_eval.registry.retrievers import Kind
from vipune_eval.registry.views import View


@dataclass(frozen=True)
class Search:
    """The rule that searches one kind of retriever, and the command its shell line runs."""

    rule: str
    command: str


SEARCHES = {
    Kind.ARMS: Search("fuse_reference", "fuse-reference"),  # from the arms of search_reference
    Kind.PERSONA: Search("search_family", "search-family"),
    Kind.PLUGIN: Search("search_plugin", "search-plugin"),
    Kind.VIPUNE: Search("search_vipune", "search-vipune"),
    Kind.LIB: Search("search_vipune_lib", "search-vipune-lib"),
}


@dataclass(frozen=True)
class Run:
    """One set of results of one retriever (per view): what the score stage merges."""

    name: str
    retriever: str
    binary: str | None = None  # fingerprint id, for the vipune lane
    spec: retrievers.Spec | None = None  # what a reference run runs (family setting or plugin)
    lane: str | None = None  # the lane's fingerprint id, for the vipune-lib runs

    @property
    def kind(self) -> Kind:
        return Kind.VIPUNE if self.binary is not None else self.spec.kind

    @property
    def status_run(self) -> str | None:
        """Failed pairs and latencies live beside the hybrid run of the binary's (or the lane's) shards."""
        if self.lane is not None:
            return paths.lib_run(self.lane)
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
    sources: dict[str, str] = field(default_factory=dict)  # build id → where it came from, in words
    lab: whatif_grid.Lab | None = None          # the what-if grid (primary view only)
    local_sha256: str | None = None             # a local dataset.path's sha256 (its identity)
    lane: str | None = None                     # fingerprint id of the vipune-lane beside vipune.binary
    lane_path: str = ""                         # where that lane is ("" when vipune.binary is missing)

    # ------------------------------------------------------------ names
    @property
    def retrievers(self) -> list[str]:
        return [s.name for s in self.specs]

    def runs(self) -> dict[str, Run]:
        """Run name → Run, for every retriever of every build that is scored."""
        out: dict[str, Run] = {}
        for s in self.specs:
            if s.reference:
                out[s.name] = Run(s.name, s.name, spec=s)
            elif s.kind is Kind.LIB:
                out[self.run_of(s.name)] = Run(self.run_of(s.name), s.name, spec=s, lane=self.lane)
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
        if spec.reference:
            return retriever
        semantic = spec.mirror["use"] == "dense"
        if spec.kind is Kind.LIB:
            return paths.lib_run(self.lane, semantic=semantic)
        return paths.vipune_run(self.primary, semantic=semantic)

    def view(self, folder: str) -> View:
        for view in self.views:
            if view.folder == folder:
                return view
        raise EvalError(f"no configured view has the folder {folder!r}")



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


def _source(key: str, entry: str, build: dict[str, Any]) -> str:
    """Where a build came from, for the report: the config entry and the file it named."""
    if "path" not in build:
        return f"{key} {entry!r}: evaluated in this directory before"
    moved = vipune_binary.lock_deviations(Path(build["path"]))
    return (f"{key} {entry!r}" + (f" = {build['path']}" if build["path"] != entry else "")
            + (f", built with its Cargo.lock moved where the registry lacks a pin ({', '.join(moved)})"
               if moved else ""))


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


def schema_problems(config: dict[str, Any], schema: dict[str, Any]) -> tuple[list[str], list[tuple[str, str | None]]]:
    """Every way ``config`` breaks ``schema``, worded for a person: (problems, unknown keys as
    (dotted key, its nearest valid dotted key or None)). Sets the schema's defaults in ``config``
    as Snakemake's ``validate`` does (``validate`` stops at the first error and prints the config)."""
    base = jsonschema.validators.validator_for(schema)
    check_properties = base.VALIDATORS["properties"]

    def properties(validator, props, instance, subschema):
        if isinstance(instance, dict):
            for name, sub in props.items():
                if "default" in sub:
                    instance.setdefault(name, copy.deepcopy(sub["default"]))
        yield from check_properties(validator, props, instance, subschema)

    validator = jsonschema.validators.extend(base, {"properties": properties})(schema)
    problems: list[str] = []
    unknown: list[tuple[str, str | None]] = []
    for error in sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path]):
        where = ".".join(map(str, error.absolute_path))
        if error.validator == "additionalProperties" and error.validator_value is False:
            known = list(error.schema.get("properties", {}))
            for key in sorted(set(error.instance) - set(known)):
                close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
                prefix = f"{where}." if where else ""
                unknown.append((prefix + str(key), prefix + close[0] if close else None))
        else:
            problems.append(f"{where or 'the config'}: {error.message}")
    return problems, unknown


def _cross_key_problems(config: dict[str, Any]) -> list[str]:
    """What a schema cannot say: limits against each other, the primary granularity, NaN."""
    problems = []
    if max(config["ks"]) > config["search_limit"]:
        problems.append(f"search_limit ({config['search_limit']}) must be at least the largest k "
                        f"({max(config['ks'])})")
    if config["search"]["row_limit"] < config["search_limit"]:
        problems.append(f"search.row_limit ({config['search']['row_limit']}) must be at least "
                        f"search_limit ({config['search_limit']})")
    problems += granularities.problems(config["granularities"])
    for section, key in (("vipune", "timeout"), ("search", "plugin_timeout")):
        seconds = config.get(section, {}).get(key, 300)  # the schema's bounds let NaN and .inf through
        if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
            problems.append(f"{section}.{key} must be a finite number of seconds > 0, got {seconds!r}")
    fraction = config["split"]["dev_fraction"]
    if not 0 <= fraction <= 1:  # the schema's bounds let NaN through
        problems.append(f"split.dev_fraction must be a number from 0 to 1, got {fraction!r}")
    elif isinstance(config.get("whatif"), dict) and fraction in (0, 1):
        empty = "dev" if fraction == 0 else "test"
        select_on = config["whatif"].get("select_on", "dev")
        role = "chosen" if select_on == empty else "confirmed"
        problems.append(f"split.dev_fraction {fraction} leaves the {empty} split empty, and the what-if lab "
                        f"(whatif, select_on: {select_on}) needs pairs on both splits: nothing could be "
                        f"{role} on {empty}; set split.dev_fraction between 0 and 1 (the default 0.2), "
                        "or remove the whatif block")
    return problems


def config_error(problems: list[str], unknown: list[tuple[str, str | None]] = ()) -> EvalError:
    """One error naming every problem of the configuration; unknown keys come last, and the fix
    renames each to its nearest valid name, so the last line a user reads says what to type."""
    lines = list(problems)
    for key, close in unknown:
        lines.append(f"{key}: not a config key" + (f"; did you mean {close}?" if close else ""))
    renames = [f"{key} → {close}" for key, close in unknown if close]
    others = [key for key, close in unknown if not close]
    fix = "fix these keys in your config file (every key: docs/configuration.md)"
    if others:
        fix = f"remove {', '.join(others)}, or " + fix
    if renames:
        fix = f"{fix}; rename {', '.join(renames)}"
    head = "bad configuration: " if len(lines) == 1 else f"bad configuration, {len(lines)} problems:\n  - "
    return EvalError(head + "\n  - ".join(lines), fix=fix)


def check_config(config: dict[str, Any], schema: dict[str, Any] | None = None) -> None:
    """Every problem of the configuration in one message, before any job runs: the schema's
    (shapes, bounds, each unknown key with its nearest valid name) and what the schema cannot
    say (``_cross_key_problems``). With ``schema``, its defaults are set in ``config``."""
    problems, unknown = schema_problems(config, schema) if schema is not None else ([], [])
    problems += _attempt(problems, _cross_key_problems, config) or []
    if problems or unknown:
        raise config_error(problems, unknown)


def _attempt(problems: list[str], step, *args):
    """``step(*args)``, its EvalError kept as one more problem (so every problem is named at
    once); None when it failed."""
    try:
        return step(*args)
    except EvalError as exc:
        problems.append(str(exc))
    except (KeyError, TypeError, ValueError, AttributeError):
        if not problems:  # a shape the schema's own problems do not explain
            raise
    return None


def _dataset_file(config: dict[str, Any]) -> tuple[str, str | None]:
    """Resolve the ``dataset:`` block (the rules read the resolved one); a local file is
    fingerprinted now, and identified by its bytes (its sha256 is returned beside its path); a
    download names the file it will write."""
    if not config["dataset"].get("path"):
        config["dataset"] = datasets.resolve(config["dataset"])
        return f"{paths.RESULTS}/data/download/{config['dataset']['filename']}", None
    path = Path(os.path.expanduser(config["dataset"]["path"])).resolve()
    fingerprint = fingerprints.local_dataset_fingerprint(path, config["dataset"].get("sha256"),
                                                         Path(paths.CACHE) / "sha256.json")
    config["dataset"] = datasets.resolve(config["dataset"], local_sha256=fingerprint["sha256"])
    write_json_if_changed(paths.DATASET_FINGERPRINT, fingerprint)
    return str(path), fingerprint["sha256"]


def _model_dir(config: dict[str, Any]) -> str:
    """A local model folder, fingerprinted now, or the folder the download will fill."""
    model = config["model"]
    if not model["path"]:
        return f"{paths.RESULTS}/model/download"
    path = Path(os.path.expanduser(model["path"])).resolve()
    write_json_if_changed(paths.MODEL_FINGERPRINT, fingerprints.model_fingerprint(
        path, repo_id=model["repo_id"], revision=model["revision"], file=model["file"],
        pooling=model["pooling"], cache_file=Path(paths.CACHE) / "sha256.json"))
    return str(path)


def prepare(config: dict[str, Any], schema: dict[str, Any] | None = None) -> Workspace:
    """Check the configuration (every problem in one message), write the fingerprints and the
    config, name the builds. With ``schema``, the config is checked against it and its defaults
    are set first (the Snakefile passes the workflow's schema)."""
    problems, unknown = schema_problems(config, schema) if schema is not None else ([], [])
    specs = _attempt(problems, retrievers.resolve, config["retrievers"])
    lab = None
    if specs is not None:
        lab = _attempt(problems, lambda: whatif_grid.resolve(config.get("whatif"), specs,
                                                             measures.keys(config["ks"], measures.SEED)))
        clash = sorted({s.name for s in lab.variants} & {s.name for s in specs}) if lab else []
        if clash:
            problems.append(f"whatif: the variant names {clash} are taken by configured retrievers")
    problems += _attempt(problems, _cross_key_problems, config) or []
    dataset_file, local_sha256 = _attempt(problems, _dataset_file, config) or (None, None)
    model_dir = _attempt(problems, _model_dir, config)
    if problems or unknown:
        raise config_error(problems, unknown)
    workspace = Workspace(config=config, dataset_file=dataset_file, model_dir=model_dir, local_sha256=local_sha256,
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
            workspace.sources[primary["id"]] = _source("vipune.binary", config["vipune"]["binary"], primary)
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
                key = "vipune.baseline" if entry == config["vipune"].get("baseline") else "vipune.compare"
                workspace.sources[build["id"]] = _source(key, entry, build)
            workspace.fingerprints[build["id"]] = build
            if "path" in build:
                workspace.binaries[build["id"]] = build["path"]
        if any(s.kind is Kind.LIB for s in specs):
            _lane(workspace, primary if workspace.primary != "missing" else None, config)
        if config["vipune"]["preflight"] == "enforce":
            refuse_recorded_failures(workspace)
    write_json_if_changed(paths.CONFIG_JSON, config)
    write_json_if_changed(paths.BUILD_SOURCES, workspace.sources)
    return workspace


def _lane(ws: Workspace, primary: dict[str, Any] | None, config: dict[str, Any]) -> None:
    """The vipune-lane beside vipune.binary, fingerprinted (refused, with the command that builds
    it, when it is not there); "missing" with the binary, which the vipune_missing rule names."""
    if primary is None:
        ws.lane = "missing"
        return
    path = vipune_lane.find_lane(Path(primary["path"]), primary["version"])
    fingerprint = vipune_lane.lane_fingerprint(path, primary, config["vipune"]["timeout"])
    write_json_if_changed(paths.lane_fingerprint(fingerprint["id"]), fingerprint)
    ws.lane, ws.lane_path = fingerprint["id"], str(path)


def refuse_recorded_failures(ws: Workspace) -> None:
    """``vipune.preflight`` is not a parameter of the preflight or the searches (both modes run
    the same checks; enforce stops at the first failure), so switching it reruns nothing. Enforce
    still holds for a build whose failed checks were recorded under ``record``: it is refused
    here, before any job, as its preflight job would have been."""
    refused = []
    for build in ([ws.primary] if ws.primary else []) + ws.builds:
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


def plots(ws: Workspace) -> list[str]:
    """The plots of this run: each one that has something to show (stages.report.plots.PLOTS)."""
    from vipune_eval.stages.report.plots import RunShape, shown

    return shown(RunShape(seed_views=sum(view.protocol == "seed" for view in ws.views),
                          builds=bool(ws.primary and "vipune" in ws.retrievers), lab=bool(ws.lab)))


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


class LabRun(TypedDict):
    name: str
    params: dict[str, Any]
    metrics: str  # its metrics file (primary view)
    run: str      # its merged run file


class LabManifest(TypedDict):
    measure: str
    select_on: str
    grid: dict[str, list[Any]]
    base: LabRun
    variants: list[LabRun]


class ManifestView(TypedDict):
    """One view's entry: what it is and where each of its inputs lives under results/."""

    name: str
    folder: str
    protocol: str
    granularity: str
    description: str
    ks: list[int]
    measures: list[str]
    summary: str
    qrels: str
    pairs: str
    rows: str
    embeddings: list[str]
    metrics: dict[str, str]  # configured retriever → its metrics file
    builds: dict[str, str]   # vipune.compare build id → its metrics file (primary view only)


class Manifest(TypedDict):
    """results/report-inputs.json: every input of the report (stages.report.build reads it)."""

    config: str
    dataset_fp: str
    model_fp: str
    retrievers: list[str]
    corpus: dict[str, Any] | None
    settings: dict[str, dict[str, Any]]
    roles: dict[str, str | None]
    mirrors: dict[str, str | None]
    primary: str | None
    lane: dict[str, str] | None  # the vipune-lane of the vipune-lib runs: its id and fingerprint file
    builds: list[str]
    baseline: str | None
    sources: str  # paths.BUILD_SOURCES: build id → where it came from (not an input of the report)
    fingerprints: dict[str, str]
    preflight: dict[str, str]
    views: list[ManifestView]
    whatif: LabManifest | None


def report_manifest(ws: Workspace) -> Manifest:
    """Every input of the report, with the structure it needs (views, runs, builds)."""
    entries: list[ManifestView] = []
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
        "corpus": datasets.corpus(ws.config["dataset"], ws.local_sha256),
        # each vipune-lane retriever → the configured reference run with the setting it mirrors
        "settings": {s.name: s.setting() for s in ws.specs},  # what each retriever ran
        "roles": retrievers.roles(ws.specs),
        "mirrors": {s.name: retrievers.mirror_of(s, ws.specs) for s in ws.specs if not s.reference},
        "primary": ws.primary, "builds": ws.builds,
        "lane": ({"id": ws.lane, "fingerprint": paths.lane_fingerprint(ws.lane)}
                 if ws.lane and ws.lane != "missing" else None),
        "baseline": ws.baseline, "sources": paths.BUILD_SOURCES,
        "fingerprints": {b: paths.binary_fingerprint(b) for b in binary},
        # a build named by id alone keeps the preflight it had when it was evaluated here
        "preflight": {b: paths.preflight(b) for b in binary
                      if b in ws.binaries or b == ws.primary or Path(paths.preflight(b)).exists()},
        "views": entries,
        "whatif": whatif_manifest(ws),
    }


def whatif_manifest(ws: Workspace) -> LabManifest | None:
    """The what-if grid's runs, scored in the primary view only."""
    lab = ws.lab
    if not lab:
        return None

    def entry(s: retrievers.Spec) -> LabRun:
        return {"name": s.name, "params": s.params, "metrics": metrics_file(views.PRIMARY, s.name),
                "run": paths.fill(paths.RUN, view=views.PRIMARY.folder, run=s.name)}

    return {"measure": lab.measure, "select_on": lab.select_on, "grid": lab.grid,
            "base": entry(lab.base), "variants": [entry(s) for s in lab.variants]}


def manifest_files(manifest: Manifest) -> list[str]:
    """Every file the report reads (the report rule's inputs), but the config: it holds
    machine-specific paths, and moving a file must not rerun anything (what the config changes
    that matters reaches the report through these inputs)."""
    files = [manifest["dataset_fp"], manifest["model_fp"],
             *manifest["fingerprints"].values()]
    if manifest.get("lane"):
        files.append(manifest["lane"]["fingerprint"])
    files += manifest["preflight"].values()
    for view in manifest["views"]:
        files += [view["summary"], view["qrels"], view["pairs"], view["rows"], *view["embeddings"],
                  *view["metrics"].values(), *view["builds"].values()]
    lab = manifest.get("whatif")
    if lab:
        files += [lab["base"]["metrics"], *(v["metrics"] for v in lab["variants"])]
    return list(dict.fromkeys(files))
