# Parse-time set-up (vipune_eval.plan.workspace) and the input functions of the rules. Parsing
# writes nothing and takes no lock (a dry run, --lint, --dag, --summary, --list-* and --report
# parse this file too): a real run's start does (start_run, the Snakefile's onstart).
import atexit
import os
import re
import shlex
import sys
from pathlib import Path

from vipune_eval.core import paths
from vipune_eval.registry.models import pins as model_pins
from vipune_eval.plan import cluster, failures, manifest, planned_file, rundir
from vipune_eval.plan.config_args import read_config_args
from vipune_eval.plan import workspace as W
from vipune_eval.plan.codeversion import code_version
from vipune_eval.stages.report import report_html
from vipune_eval.errors import EvalError
from vipune_eval.registry.retrievers import Kind
from vipune_eval.registry.views import GRANULARITIES, OFFICIAL_GRANULARITIES, View
from vipune_eval.vipune.binary import MISSING, wrapped_record
from snakemake.settings.enums import RerunTrigger

RUN_LOCK = None  # the run's lock, taken by start_run: held until this process ends, kill -9 included
try:
    read_config_args(config, workflow.config_settings.config_args)  # its values as YAML
    WS = W.prepare(config, SCHEMA, workflow.configfiles)
    if workflow.is_main_process:
        for note in WS.builds.notes:
            print(f"vipune-eval: note: {note}", file=sys.stderr)
    # the jobs' library caches stay out of HOME
    os.environ.update(rundir.job_environment())
    MANIFEST = manifest.report_manifest(WS)
    # path → text of every file the plan writes (rule planned_file, workflow/rules/plan.smk)
    PLANNED = planned_file.texts({**WS.files, paths.REPORT_MANIFEST: MANIFEST})
    # each planned file's input: the mark of its text (targets too: a missing mark is made even
    # where the file's readers are up to date, as Snakemake alone would not, snakemake#1978)
    PLANNED_MARKS = {
        path: planned_file.mark(path, text) for path, text in PLANNED.items()
    }
except EvalError as exc:
    # the fix on a line of its own, last: what to do is what a user reads last
    sys.exit(exc.shown())

ENV = "../envs/vipune-eval.yaml"
VIEW_FOLDERS = [View("seed", g).folder for g in GRANULARITIES] + [
    View("official", g).folder for g in OFFICIAL_GRANULARITIES
]
RUNS = WS.runs()
PLOTS = WS.plots()  # only those with something to show in this run
# The runs of each kind of retriever (W.SEARCHES names the search job that makes them).
RUNS_OF = {kind: [r for r in RUNS.values() if r.kind is kind] for kind in W.SEARCHES}
try:
    # A plugin's source bytes are its search jobs' code version (editing it reruns them only).
    # The plugin runner imports numpy and pyarrow, so only a run with plugins imports it.
    PLUGIN_SOURCES = {}
    if RUNS_OF[Kind.PLUGIN]:
        from vipune_eval.stages.search import plugin

        PLUGIN_SOURCES = {
            r.name: plugin.source_digest(r.spec.use) for r in RUNS_OF[Kind.PLUGIN]
        }
except EvalError as exc:
    sys.exit(exc.shown())


def start_run():
    """The onstart hook: Snakemake calls it for a real run only, after planning the DAG and before
    the first job. A cluster check that fails stops the run before anything is written; then the
    lock, the scratch a killed run left, the planned files' texts, the run's record (its
    config, the builds' sources) and the sha256 cache (plan.rundir.start).
    """
    global RUN_LOCK
    cluster.check_workflow(workflow)
    try:
        RUN_LOCK = rundir.start(PLANNED, WS.record, [WS.sha256_cache])
    except EvalError as exc:
        raise SystemExit(exc.shown()) from None


def planned_pattern():
    """The planned files' {planned} (paths.PLANNED): the planned_file rule makes exactly these."""
    below = (os.path.relpath(path, paths.RESULTS) for path in PLANNED)
    return "|".join(re.escape(path) for path in below)


def planned_mark(wildcards):
    """The planned file's input: the mark of its text (plan.planned_file.mark). Checked here, when
    the DAG is planned (the rerun triggers are not known at parse time): a text planned before and
    come back (its mark is there) is seen through the params trigger alone."""
    path = paths.fill(paths.PLANNED, **wildcards)
    triggers = workflow.dag_settings.rerun_triggers
    try:
        planned_file.refuse_unseen(
            {path: PLANNED[path]}, RerunTrigger.PARAMS in triggers
        )
    except EvalError as exc:
        sys.exit(exc.shown())
    return PLANNED_MARKS[path]


def planned_sha256(wildcards):
    """The planned file's tracked param: the sha256 of its text (a changed text reruns it)."""
    return planned_file.digest(PLANNED[paths.fill(paths.PLANNED, **wildcards)])


def runs_pattern(runs):
    """A wildcard constraint matching exactly these run names (nothing when there are none)."""
    return "|".join(re.escape(r.name) for r in runs) or "(?!)"


def untracked(value):
    """A param that is not a rerun trigger: params functions taking ``input`` are not tracked.

    Used for machine-specific locations (model folder, dataset file, binary path) whose content
    is already tracked through the fingerprint inputs: moving a file must not rerun anything.
    """
    return lambda wildcards, input: value


def hub_limits():
    """The downloads' timeouts as options (untracked: a new limit re-downloads nothing)."""
    download = config["download"]
    return (
        f"--timeout {download['timeout']} --stall-timeout {download['stall_timeout']}"
    )


def view_of(wildcards):
    return WS.view(wildcards.view)


def binary_path(wildcards, input):
    """The executable behind a fingerprint id (not a rerun trigger: the bytes are the input).

    Empty for a binary evaluated before but not configured now: the job refuses it, saying so
    (vipune.binary.planned_binary). The rules pass it as --binary=VALUE: an empty value quoted
    alone would vanish from the command line.
    """
    return WS.builds.paths.get(wildcards.binary, "")


def binary_wrapped_record(wildcards):
    """Where the plan writes one (vipune.fingerprint_files set): the record of the files the wrapper
    script named as the binary runs, which its jobs read beside the fingerprint
    (vipune.binary.planned_binary), so its planned_file job must run first."""
    record = str(wrapped_record(Path(paths.binary_fingerprint_file(wildcards.binary))))
    return [record] if record in PLANNED else []


def lane_binary_fingerprint(wildcards):
    """The fingerprint file of the build a lane belongs to (the binary it was built beside, its
    id in the vipune-lane's; a vipune-lane built alone is its own build)."""
    return WS.builds.fingerprint_file(WS.builds.lane_builds[wildcards.lane_build])


def lane_binary_path(wildcards, input):
    """The binary a lane was built beside, as binary_path gives it (not a rerun trigger)."""
    return WS.builds.paths.get(WS.builds.lane_builds[wildcards.lane_build], "")


def get_filter_rows_inputs(wildcards):
    inputs = {"dataset": paths.DATASET_FINGERPRINT}
    if view_of(wildcards).needs_tokenizer:
        inputs["model"] = (
            paths.MODEL_FINGERPRINT
        )  # chunks are cut by the model's tokenizer
    return inputs


def tokenizer_option(wildcards, input):
    if "model" not in input.keys():
        return ""
    tokenizer = Path(WS.model_dir) / "tokenizer.json"
    return f"--tokenizer {shlex.quote(str(tokenizer))}"


def expected_option(wildcards):
    expected = config["dataset"]["expected"]
    if not expected:
        return ""
    counts = ",".join(f"{k}={v}" for k, v in sorted(expected.items()))
    return f"--expected {shlex.quote(counts)}"


def get_embeddings(wildcards):
    return WS.embed_shards(view_of(wildcards))


# What every search of a shard of personas reads: its view's rows, texts and embeddings.
SHARD_INPUTS = {
    "rows": paths.fill(paths.FILTER, name="rows.parquet"),
    "texts": paths.fill(paths.FILTER, name="texts.parquet"),
    "embeddings": get_embeddings,
}


def shard_options(wildcards, input):
    """SHARD_INPUTS and the shard, as every search command of a shard takes them (not a rerun
    trigger: the inputs are the inputs)."""
    embeddings = " ".join(shlex.quote(e) for e in input.embeddings)
    return (
        f"--rows {shlex.quote(input.rows)} --texts {shlex.quote(input.texts)} --embeddings {embeddings}"
        f" --shard {wildcards.shard} --shards {wildcards.shards}"
    )


def search_options(wildcards):
    """What the view's searches rank to (registry.views.View.ranking_settings), as the command line."""
    return " ".join(view_of(wildcards).ranking_settings(config).options())


def get_arms(wildcards):
    return WS.arms_shards(view_of(wildcards))


def retriever_spec(wildcards):
    """The run's family setting or plugin as canonical JSON: a change reruns this run only."""
    return RUNS[wildcards.run].spec.canonical()


def get_run_shards(wildcards):
    return WS.run_shards(view_of(wildcards), RUNS[wildcards.run])


def get_status_shards(wildcards):
    return WS.status_shards(view_of(wildcards), RUNS[wildcards.run])


def score_options(wildcards):
    """What the view scores, and the ranking its searches are made with (the metrics record
    both: the report checks them against what it states)."""
    view = view_of(wildcards)
    options = [
        "--ks " + " ".join(map(str, view.ks(config))),
        "--measures " + " ".join(view.measure_names()),
        *view.ranking_settings(config).options(),
    ]
    if view.turn_level_run:
        options.append("--turn-to-session")
    return " ".join(options)


def get_report_inputs(wildcards):
    return [paths.REPORT_MANIFEST, *manifest.manifest_files(MANIFEST)]


def failed_jobs():
    """(rule, logs) of every failed job; of a group job, the members that left outputs missing."""
    jobs = []
    for job in getattr(workflow.scheduler, "failed", ()):
        members = list(job.jobs) if job.is_group() else [job]
        broken = [m for m in members if not all(os.path.exists(f) for f in m.output)]
        jobs += [(m.rule.name, [str(f) for f in m.log]) for m in broken or members]
    return jobs


def ran_rules():
    """The rules of the jobs this run executed."""
    return {job.rule.name for job in workflow.dag.needrun_jobs(exclude_finished=False)}


def print_report(path, failed=False):
    if not failed:
        # The run is over: the texts it staged are gone, and its lock is released first, since
        # the HTML report of a run of some targets is planned again in a Snakemake process of its
        # own, which reads this workflow too. The summary is printed last, after Snakemake's own
        # lines; a run that did not rebuild the report (--until score, a target upstream) names
        # it as an earlier run's.
        planned_file.unstage()
        if RUN_LOCK is not None:
            RUN_LOCK.close()
        ran = ran_rules()
        if not ran & {"report", "plots", "report_page"}:
            atexit.register(
                print,
                f"vipune-eval: this run did not rebuild the report: {paths.SUMMARY} and the reports "
                "are an earlier run's; run snakemake without --until, --omit-from or targets to "
                "bring them up to date",
                flush=True,
            )
            return
        lines = []
        why = report_html.build_after_run(workflow)
        if "report" in ran and Path(paths.SUMMARY).exists():
            lines.append(Path(paths.SUMMARY).read_text().rstrip("\n"))
        if why:
            lines.append(
                f"vipune-eval: the HTML report was not built: {why}; "
                "`vipune-eval report-html` builds it again"
            )
        if lines:
            atexit.register(print, "\n".join(lines), flush=True)
        return
    if failures.STOPPED:
        lines = failures.stopped_lines(
            failures.STOPPED, failed_jobs(), path if Path(path).exists() else None
        )
        atexit.register(print, "\n".join(lines), file=sys.stderr, flush=True)
        return
    lines = failures.closing_lines(failed_jobs(), config, WS.builds.primary)
    if Path(path).exists():
        lines.insert(
            0,
            f"vipune-eval: this run failed; {path} is the previous run's report, not this one's",
        )
    # After Snakemake's own closing lines ("At least one job did not complete successfully"),
    # which come after this handler: the last lines a user reads say what to do.
    if lines:
        atexit.register(print, "\n".join(lines), file=sys.stderr, flush=True)
