# Helpers shared by the rules: parse-time fingerprints and get_* input functions.
import hashlib
import sys
from pathlib import Path

import vipune_eval
from vipune_eval import sources
from vipune_eval.io import EvalError, write_json_if_changed
from vipune_eval.reference import REFERENCE_RETRIEVERS

if max(config["ks"]) > config["search_limit"]:
    raise ValueError(
        f"search_limit ({config['search_limit']}) must be at least the largest k ({max(config['ks'])})"
    )

CACHE = Path("results/.cache")
ENV = "../envs/vipune-eval.yaml"
EMBED_SHARDS = config["embed"]["shards"]
SEARCH_SHARDS = config["search"]["shards"]
REFERENCE = [r for r in config["retrievers"] if r in REFERENCE_RETRIEVERS]
DATASET_FP = "results/fingerprints/dataset.json"
MODEL_FP = "results/fingerprints/model.json"
CONFIG_JSON = "results/config.json"
PACKAGE_DIR = Path(vipune_eval.__file__).parent


def fail(message):
    sys.exit(f"vipune-eval: {message}")


def evaluate_binary(binary):
    """Fingerprint a vipune binary (name on PATH or path); its results live under the id."""
    path = sources.resolve_binary(binary)
    fingerprint = sources.binary_fingerprint(path, CACHE)
    write_json_if_changed(
        f"results/fingerprints/vipune-{fingerprint['id']}.json", fingerprint
    )
    BINARIES[fingerprint["id"]] = str(path)
    return fingerprint["id"]


def baseline_id(baseline):
    """vipune.baseline is a binary (path or name) or the id of a binary evaluated here before."""
    if Path(f"results/fingerprints/vipune-{baseline}.json").exists():
        return baseline
    try:
        return evaluate_binary(baseline)
    except EvalError:
        known = sorted(
            p.name[7:-5] for p in Path("results/fingerprints").glob("vipune-*.json")
        )
        raise EvalError(
            f"vipune.baseline {baseline!r} is neither an executable vipune nor the fingerprint of "
            f"a binary evaluated in this directory (known: {', '.join(known) or 'none'})"
        )


# The three things a user changes are reduced to small fingerprint files, written only when
# their text changes, so staleness follows content, not timestamps or paths.
try:
    if config["dataset"]["path"]:
        DATASET_FILE = str(Path(config["dataset"]["path"]).resolve())
        write_json_if_changed(
            DATASET_FP,
            sources.local_dataset_fingerprint(
                Path(DATASET_FILE), config["dataset"]["sha256"], CACHE / "sha256.json"
            ),
        )
    else:
        DATASET_FILE = f"results/data/download/{config['dataset']['filename']}"
    if config["model"]["path"]:
        MODEL_DIR = str(Path(config["model"]["path"]).resolve())
        write_json_if_changed(
            MODEL_FP,
            sources.model_fingerprint(
                Path(MODEL_DIR),
                repo_id=config["model"]["repo_id"],
                revision=config["model"]["revision"],
                file=config["model"]["file"],
                pooling=config["model"]["pooling"],
                cache_file=CACHE / "sha256.json",
            ),
        )
    else:
        MODEL_DIR = "results/model/download"
    # A missing binary is reported by the vipune_missing rule, so dry runs and --lint still work.
    VIPUNE_ID, BASELINE_ID = "missing", None
    BINARIES = {}  # fingerprint id -> path of a binary this invocation can run
    if "vipune" in config["retrievers"]:
        try:
            VIPUNE_ID = evaluate_binary(config["vipune"]["binary"])
        except EvalError:
            pass
        if config["vipune"]["baseline"]:
            BASELINE_ID = baseline_id(config["vipune"]["baseline"])
    write_json_if_changed(CONFIG_JSON, config)
except EvalError as exc:
    fail(exc)


def untracked(value):
    """A param that is not a rerun trigger: params functions taking ``input`` are not tracked.

    Used for machine-specific locations (model folder, dataset file, binary path) whose content
    is already tracked through the fingerprint inputs: moving a file must not rerun anything.
    """
    return lambda wildcards, input: value


def code_version(*modules):
    """Hash of the package modules a step runs, used as a param so that editing one reruns
    exactly the steps that use it.

    Snakemake tracks the shell line of a rule but not the Python modules it calls.
    """
    digest = hashlib.sha256()
    for module in sorted(modules):
        digest.update((PACKAGE_DIR / f"{module}.py").read_bytes())
    return digest.hexdigest()[:16]


def binary_path(wildcards, input):
    """The executable behind a fingerprint id (not a rerun trigger: the bytes are the input).

    Empty for a binary evaluated before but not configured now; search-vipune then says so.
    """
    return BINARIES.get(wildcards.binary, "")


def run_name(retriever):
    """Results of the vipune lane live under the binary's fingerprint."""
    return f"vipune-{VIPUNE_ID}" if retriever == "vipune" else retriever


def expected_args(wildcards):
    expected = config["dataset"]["expected"] or {}
    return " ".join(
        f"--expected-{key} {value}" for key, value in sorted(expected.items())
    )


def get_embeddings(wildcards=None):
    return expand(
        "results/embed/shard-{shard}-of-{shards}.parquet",
        shard=range(EMBED_SHARDS),
        shards=EMBED_SHARDS,
    )


def get_run_shards(wildcards):
    return expand(
        "results/{view}search/{run}/shard-{shard}-of-{shards}.run",
        view=wildcards.view,
        run=wildcards.run,
        shard=range(SEARCH_SHARDS),
        shards=SEARCH_SHARDS,
    )


def get_status_shards(wildcards):
    """Status files (failed pairs, latencies) exist for the vipune lane only."""
    if not wildcards.run.startswith("vipune-"):
        return []
    return expand(
        "results/{view}search/{run}/shard-{shard}-of-{shards}.status.json",
        view=wildcards.view,
        run=wildcards.run,
        shard=range(SEARCH_SHARDS),
        shards=SEARCH_SHARDS,
    )


def get_vipune_fingerprint(wildcards):
    return f"results/fingerprints/vipune-{wildcards.binary}.json"


def get_metrics(wildcards=None, view=""):
    return [f"results/{view}metrics/{run_name(r)}.json" for r in config["retrievers"]]


OFFICIAL = config["protocol"] == "official"


def get_official_filter_outputs():
    if not OFFICIAL:
        return []
    return [
        "results/official/filter/pairs.parquet",
        "results/official/filter/qrels.txt",
    ]


def official_filter_args(wildcards):
    if not OFFICIAL:
        return ""
    return (
        "--official-pairs results/official/filter/pairs.parquet"
        " --official-qrels results/official/filter/qrels.txt"
    )


def get_report_inputs(wildcards=None):
    inputs = {
        "summary": "results/filter/summary.json",
        "qrels": "results/filter/qrels.txt",
        "pairs": "results/filter/pairs.parquet",
        "embeddings": get_embeddings(),
        "dataset_fp": DATASET_FP,
        "model_fp": MODEL_FP,
        "metrics": get_metrics(),
    }
    if OFFICIAL:
        inputs["official_metrics"] = get_metrics(view="official/")
        inputs["official_qrels"] = "results/official/filter/qrels.txt"
    if "vipune" in config["retrievers"]:
        inputs["vipune_fp"] = f"results/fingerprints/vipune-{VIPUNE_ID}.json"
        inputs["preflight"] = f"results/preflight/vipune-{VIPUNE_ID}.json"
        if BASELINE_ID:
            inputs["baseline_fp"] = f"results/fingerprints/vipune-{BASELINE_ID}.json"
            inputs["baseline_metrics"] = f"results/metrics/vipune-{BASELINE_ID}.json"
    return inputs


def report_options(wildcards, input):
    """Optional report arguments (follow the inputs, so not a rerun trigger of their own)."""
    options = [f"--config {CONFIG_JSON}"]
    if "vipune_fp" in input.keys():
        options.append(f"--vipune-fp {input.vipune_fp} --preflight {input.preflight}")
    if "official_metrics" in input.keys():
        options.append(
            f"--official-qrels {input.official_qrels} --official-metrics {input.official_metrics}"
        )
    if "baseline_fp" in input.keys():
        options.append(
            f"--baseline-fp {input.baseline_fp} --baseline-metrics {input.baseline_metrics}"
        )
    return " ".join(options)


def print_report(path):
    if Path(path).exists():
        print(Path(path).read_text(), end="")
