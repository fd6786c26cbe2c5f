"""Parse-time set-up of a run: what the Snakefile needs before it can plan.

The three things a user changes are reduced to small fingerprint files, so staleness follows
content, not timestamps or paths: the dataset (its sha256), the model (revision, file hashes,
pooling) and every vipune build (plan.builds). ``prepare`` checks the config (plan.config_check),
computes the fingerprints, resolves the builds and returns a frozen ``Workspace`` that names every
run and the files of the plan. It writes nothing (a dry run parses the Snakefile too): the
fingerprint files are the run's to write (``Workspace.files``, plan.planned_file), and so are its
record and the sha256 cache (plan.rundir.start). It is plain Python: ``prepare(config, schema)``
can be called (and tested) without Snakemake.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from vipune_eval.core import fingerprints, paths
from vipune_eval.errors import EvalError
from vipune_eval.plan import builds as vipune_builds
from vipune_eval.plan import config_check, whatif_grid
from vipune_eval.plan.builds import Builds, compared_on
from vipune_eval.registry import datasets, retrievers, views
from vipune_eval.registry.lanes import LIB
from vipune_eval.registry.retrievers import Kind
from vipune_eval.registry.views import View

T = TypeVar("T")


@dataclass(frozen=True)
class Search:
    """The rule that searches one kind of retriever, and the command its shell line runs."""

    rule: str
    command: str


SEARCHES = {
    Kind.ARMS: Search("fuse_reference", "fuse-reference"),  # from the arms of search_arms
    Kind.PERSONA: Search("search_family", "search-family"),
    Kind.PLUGIN: Search("search_plugin", "search-plugin"),
    Kind.VIPUNE: Search("search_vipune", "search-vipune"),
    Kind.LIB: Search("search_vipune_lib", "search-vipune-lib"),
}


@dataclass(frozen=True)
class Run:
    """One set of results of one retriever (per view): what the score stage merges."""

    name: str
    binary: str | None = None  # fingerprint id, for the binary lane
    spec: retrievers.Spec | None = None  # what a reference run runs (family setting or plugin)
    lane: str | None = None  # the vipune-lane's fingerprint id, for the lib lane's runs

    @property
    def kind(self) -> Kind:
        if self.binary is not None:
            return Kind.VIPUNE
        return _resolved(self.spec, f"run {self.name}: a retriever entry").kind

    @property
    def status_run(self) -> str | None:
        """Failed pairs and latencies live beside the hybrid run of the binary lane's (or the lib lane's) shards."""
        if self.lane is not None:
            return paths.lib_run(self.lane)
        return None if self.binary is None else paths.vipune_run(self.binary)


@dataclass(frozen=True)
class Workspace:
    """A run as ``prepare`` resolved it; nothing changes it afterwards."""

    config: dict[str, Any]
    dataset_file: str
    model_dir: str
    views: list[View]
    specs: list[retrievers.Spec]  # the checked retrievers entries
    builds: Builds
    lab: whatif_grid.Lab | None = None  # the what-if grid (primary view only)
    local_sha256: str | None = None  # a local dataset.path's sha256 (its identity)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # fingerprint file → content, for the run to write
    sha256_cache: fingerprints.Sha256Cache | None = None  # what parsing hashed, for the run to save

    @property
    def record(self) -> dict[str, Any]:
        """The run's record, written when a real run starts: the config as resolved, the builds' sources."""
        return {paths.CONFIG_JSON: self.config, paths.BUILD_SOURCES: self.builds.sources}

    # ------------------------------------------------------------ names
    @property
    def retrievers(self) -> list[str]:
        return [s.name for s in self.specs]

    def runs(self) -> dict[str, Run]:
        """Run name → Run, for every retriever of every build that is scored."""
        out: dict[str, Run] = {}
        for s in self.specs:
            if s.reference:
                out[s.name] = Run(s.name, spec=s)
            elif s.kind is Kind.LIB:
                out[self.run_of(s.name)] = Run(self.run_of(s.name), spec=s, lane=self.builds.lane)
            else:
                out[self.run_of(s.name)] = Run(self.run_of(s.name), self.builds.primary)
        for build in self.builds.compared:
            run = self.compared_run(build)
            out.setdefault(run.name, run)
        if self.lab:
            for s in (self.lab.base, *self.lab.variants):
                out.setdefault(s.name, Run(s.name, spec=s))
        return out

    def compared_run(self, build: str) -> Run:
        """The run a build of vipune.compare is compared by: the binary's hybrid search, or the
        lib lane's where only the lib lane is configured (plan.builds.compared_on)."""
        if compared_on(self.specs) is Kind.LIB:
            lane = self.builds.lanes[build]
            spec = next(s for s in self.specs if s.name == LIB.hybrid)
            return Run(paths.lib_run(lane), spec=spec, lane=lane)
        return Run(paths.vipune_run(build), build)

    def run_of(self, retriever: str) -> str:
        """The run name of a configured retriever (the primary build for the binary lane)."""
        spec = next(s for s in self.specs if s.name == retriever)
        if spec.reference:
            return retriever
        semantic = _resolved(spec.mirror, f"retriever {retriever}: the setting it mirrors")["use"] == "dense"
        if spec.kind is Kind.LIB:
            return paths.lib_run(_resolved(self.builds.lane, "vipune.binary's vipune-lane"), semantic=semantic)
        return paths.vipune_run(_resolved(self.builds.primary, "vipune.binary"), semantic=semantic)

    def view(self, folder: str) -> View:
        for view in self.views:
            if view.folder == folder:
                return view
        raise EvalError(f"no configured view has the folder {folder!r}")

    # ------------------------------------------------------------ files of the plan
    def plots(self) -> list[str]:
        """The plots of this run: each one that has something to show (stages.report.plots.PLOTS)."""
        from vipune_eval.stages.report.plots import RunShape, shown

        return shown(
            RunShape(
                seed_views=sum(view.protocol == "seed" for view in self.views),
                builds=bool(self.builds.primary and compared_on(self.specs)),
                lab=bool(self.lab),
            )
        )

    def _shards(self, pattern: str, stage: str, **values: str) -> list[str]:
        n = self.config[stage]["shards"]
        return [paths.fill(pattern, **values, shard=i, shards=n) for i in range(n)]

    def embed_shards(self, view: View) -> list[str]:
        return self._shards(paths.EMBED_SHARD, "embed", view=view.folder)

    def arms_shards(self, view: View) -> list[str]:
        return self._shards(paths.ARMS_SHARD, "search", view=view.folder)

    def run_shards(self, view: View, run: Run) -> list[str]:
        return self._shards(paths.SEARCH_SHARD, "search", view=view.folder, run=run.name)

    def lane_arms_shards(self, view: View, run: Run) -> list[str]:
        """The arms files of a lib lane's runs (beside its hybrid run's shards), none for another run."""
        if run.lane is None:
            return []
        return self._shards(paths.LANE_ARMS_SHARD, "search", view=view.folder, run=paths.lib_run(run.lane))

    def status_shards(self, view: View, run: Run) -> list[str]:
        if run.status_run is None:
            return []
        return self._shards(paths.STATUS_SHARD, "search", view=view.folder, run=run.status_run)

    def scored(self) -> list[tuple[View, Run]]:
        """Every (view, run) the score stage scores (the report's metrics): each retriever's run
        in every view; in the primary view also each compared build's and the what-if grid's."""
        runs = self.runs()
        out = []
        for view in self.views:
            names = [self.run_of(r) for r in self.retrievers]
            if view == views.PRIMARY:
                names += [self.compared_run(b).name for b in self.builds.compared]
                names += [s.name for s in (self.lab.base, *self.lab.variants)] if self.lab else []
            out += [(view, runs[name]) for name in dict.fromkeys(names)]
        return out

    def search_files(self) -> list[str]:
        """What the scores read, down to the search jobs' files: every scored run's shards and
        status shards, and the arms shards of each view that fuses runs from them. Targets of
        rule ``all``: Snakemake does not remake a missing intermediate file whose readers are up
        to date (snakemake#1978), so the shards a killed or failed ``--forcerun`` deleted stayed
        missing under the old report; as targets they are made again, and what reads them reruns."""
        files = []
        for view, run in self.scored():
            if run.kind is Kind.ARMS:
                files += self.arms_shards(view)
            files += self.run_shards(view, run) + self.status_shards(view, run) + self.lane_arms_shards(view, run)
        return list(dict.fromkeys(files))


def _resolved(value: T | None, what: str) -> T:
    """What the plan resolved wherever a run needs it (registry.retrievers gives a vipune-lane
    retriever its mirror, plan.builds a vipune.binary and its vipune-lane): None is a bug."""
    if value is None:
        raise EvalError(
            f"{what}: not resolved where a run needs it", fix="a bug of vipune-eval's plan: please report it"
        )
    return value


def _dataset_file(
    config: dict[str, Any], cache: fingerprints.Sha256Cache, files: dict[str, Any]
) -> tuple[str, str | None]:
    """Resolve the ``dataset:`` block (the rules read the resolved one); a local file is
    fingerprinted now (its fingerprint put in ``files``), and identified by its bytes (its sha256
    is returned beside its path); a download names the file it will write."""
    if not config["dataset"]["path"]:
        config["dataset"] = datasets.resolve(config["dataset"])
        return f"{paths.DATA_DOWNLOAD}/{config['dataset']['filename']}", None
    path = Path(os.path.expanduser(config["dataset"]["path"])).resolve()
    fingerprint = fingerprints.local_dataset_fingerprint(path, config["dataset"]["sha256"], cache)
    config["dataset"] = datasets.resolve(config["dataset"], local_sha256=fingerprint["sha256"])
    files[paths.DATASET_FINGERPRINT] = fingerprint
    return str(path), fingerprint["sha256"]


def _model_dir(config: dict[str, Any], cache: fingerprints.Sha256Cache, files: dict[str, Any]) -> str:
    """A local model folder, fingerprinted now (into ``files``), or the folder the download will fill."""
    model = config["model"]
    if not model["path"]:
        return paths.MODEL_DOWNLOAD
    path = Path(os.path.expanduser(model["path"])).resolve()
    files[paths.MODEL_FINGERPRINT] = fingerprints.model_fingerprint(
        path,
        repo_id=model["repo_id"],
        revision=model["revision"],
        file=model["file"],
        pooling=model["pooling"],
        cache=cache,
    )
    return str(path)


def prepare(config: dict[str, Any], schema: dict[str, Any], config_files: Sequence[str | Path] = ()) -> Workspace:
    """Check the configuration against ``schema`` (its defaults set first) and what it cannot say,
    and the ``config_files`` it was read from for a key given twice, every problem in one message;
    fingerprint the inputs and resolve the builds, writing nothing."""
    checked = config_check.check(config, schema, config_files)
    problems = checked.problems
    cache = fingerprints.Sha256Cache(Path(paths.CACHE) / "sha256.json")
    files: dict[str, Any] = {}  # file → its JSON content
    dataset_file, local_sha256 = problems.attempt(_dataset_file, config, cache, files) or (None, None)
    model_dir = problems.attempt(_model_dir, config, cache, files)
    problems.raise_any()
    # a step that failed (None) is one of the problems raise_any raised
    assert dataset_file is not None and model_dir is not None and checked.specs is not None
    builds = vipune_builds.resolve(config, checked.specs)
    return Workspace(
        config=config,
        dataset_file=dataset_file,
        model_dir=model_dir,
        views=views.configured(config),
        specs=checked.specs,
        builds=builds,
        lab=checked.lab,
        local_sha256=local_sha256,
        files={**files, **builds.files},
        sha256_cache=cache,
    )
