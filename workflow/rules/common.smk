# Parse-time set-up (vipune_eval.workspace) and the input functions of the rules.
import os
import sys
from pathlib import Path

from vipune_eval import cluster, paths
from vipune_eval import workspace as W
from vipune_eval.codeversion import code_version
from vipune_eval.io import EvalError, write_json_if_changed
from vipune_eval.views import GRANULARITIES, OFFICIAL_GRANULARITIES, View

try:
    if workflow.is_main_process and not workflow.dryrun:
        RUN_LOCK = W.hold_lock()  # held until this process ends, kill -9 included
        W.clear_tmp()
    WS = W.prepare(config)
    os.environ.update(W.job_environment())  # the jobs' library caches stay out of HOME
    MANIFEST = W.report_manifest(WS)
    write_json_if_changed(paths.REPORT_MANIFEST, MANIFEST)
except EvalError as exc:
    sys.exit(f"vipune-eval: {exc}")

ENV = "../envs/vipune-eval.yaml"
VIEW_FOLDERS = [View("seed", g).folder for g in GRANULARITIES] + [
    View("official", g).folder for g in OFFICIAL_GRANULARITIES
]
RUNS = WS.runs()


def untracked(value):
    """A param that is not a rerun trigger: params functions taking ``input`` are not tracked.

    Used for machine-specific locations (model folder, dataset file, binary path) whose content
    is already tracked through the fingerprint inputs: moving a file must not rerun anything.
    """
    return lambda wildcards, input: value


def view_of(wildcards):
    return WS.view(wildcards.view)


def binary_path(wildcards, input):
    """The executable behind a fingerprint id (not a rerun trigger: the bytes are the input).

    Empty for a binary evaluated before but not configured now; the stage then says so.
    """
    return WS.binaries.get(wildcards.binary, "")


def get_filter_rows_inputs(wildcards):
    inputs = {"dataset": paths.DATASET_FINGERPRINT}
    if view_of(wildcards).granularity == "chunk":
        inputs["model"] = (
            paths.MODEL_FINGERPRINT
        )  # chunks are cut by the model's tokenizer
    return inputs


def tokenizer_option(wildcards, input):
    if "model" not in input.keys():
        return ""
    return f"--tokenizer {WS.model_dir}/tokenizer.json"


def expected_option(wildcards):
    expected = config["dataset"]["expected"]
    if not expected:
        return ""
    return "--expected " + ",".join(f"{k}={v}" for k, v in sorted(expected.items()))


def get_embeddings(wildcards):
    return W.embed_shards(WS, view_of(wildcards))


def search_options(wildcards):
    view = view_of(wildcards)
    options = [
        f"--limit {view.search_limit(config)}",
        f"--depth {view.depth(config) if not view.turn_level_run else config['search']['row_limit']}",
    ]
    if view.turn_level_run:
        options.append("--no-collapse")
    return " ".join(options)


def get_run_shards(wildcards):
    return W.run_shards(WS, view_of(wildcards), RUNS[wildcards.run])


def get_status_shards(wildcards):
    return W.status_shards(WS, view_of(wildcards), RUNS[wildcards.run])


def score_options(wildcards):
    view = view_of(wildcards)
    options = [
        "--ks " + " ".join(map(str, view.ks(config))),
        "--measures " + " ".join(view.measure_names()),
    ]
    if view.turn_level_run:
        options.append("--turn-to-session")
    return " ".join(options)


def get_report_inputs(wildcards):
    return [paths.REPORT_MANIFEST, *W.manifest_files(MANIFEST)]


def print_report(path, failed=False):
    if failed:
        if Path(path).exists():
            print(
                f"vipune-eval: this run failed; {path} is the previous run's report, not this one's",
                file=sys.stderr,
            )
        return
    if Path(path).exists():
        print(Path(path).read_text(), end="")
