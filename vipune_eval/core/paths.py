"""Where things live under ``results/``: each path convention is one function here.

The rules, the parse-time set-up and the stages all ask this module; none of them types a
results path of its own or takes one apart.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

RESULTS = "results"
CACHE = f"{RESULTS}/.cache"
VECTORS = f"{RESULTS}/vectors"  # the vector store shared by every view (embed.py, store.py)
KEPT_STORES = f"{CACHE}/stores"  # the lib lane's seeded databases, reused (stages/search/kept_stores.py)
TMP = f"{RESULTS}/tmp"  # per-job scratch (vipune databases, private HOMEs); cleared at start
PLAN_STAGE = f"{TMP}/plan"  # the planned files' texts, staged by a real run's start (plan.planned_file)
PLANNED = f"{RESULTS}/{{planned}}"  # a planned file: {planned} is its path below results/
PLAN_MARK = f"{RESULTS}/plan/{{sha256}}"  # empty: a planned text by its sha256 (a new one is missing)
# The run's record, written when a real run starts (plan.rundir.start), never at parse time:
# its config as the workflow resolved it, and where each vipune build came from (config entry,
# file). The report reads both, not as inputs: moving a file must rerun nothing
CONFIG_JSON = f"{RESULTS}/config.json"
BUILD_SOURCES = f"{RESULTS}/fingerprints/sources.json"
DATASET_FINGERPRINT = f"{RESULTS}/fingerprints/dataset.json"
MODEL_FINGERPRINT = f"{RESULTS}/fingerprints/model.json"
VIPUNE_HF_HOME = f"{RESULTS}/model/vipune-home"
DATA_DOWNLOAD = f"{RESULTS}/data/download"  # where download-dataset puts the file
MODEL_DOWNLOAD = f"{RESULTS}/model/download"  # where download-model puts the model's files
REPORT_JSON = f"{RESULTS}/report.json"
REPORT_MD = f"{RESULTS}/report.md"
SUMMARY = f"{RESULTS}/summary.txt"  # what a finished run prints last
REPORT_HTML = f"{RESULTS}/report.html"  # Snakemake's HTML report, written at the end of a run
REPORT_PAGE = f"{RESULTS}/html/report-page.html"  # report.md as HTML, each plot beside its numbers
REPORT_FRONT = f"{RESULTS}/html/front.html"  # the HTML report's first page (workflow/report/workflow.rst)
REPORT_MANIFEST = f"{RESULTS}/report-inputs.json"  # what the report reads (a planned file: plan.planned_file)
GATE_MD = f"{RESULTS}/gate.md"  # vipune-eval gate's verdict as a pull-request comment (after a run)
GATE_XML = f"{RESULTS}/gate.xml"  # and as JUnit


# Patterns: {view} is a view's folder ("" for the primary view), {run} a run name.
FILTER = f"{RESULTS}/{{view}}filter/{{name}}"  # pairs.parquet rows.parquet texts.parquet qrels.txt summary.json
EMBED_SHARD = f"{RESULTS}/{{view}}embed/shard-{{shard}}-of-{{shards}}.parquet"
SEARCH_SHARD = f"{RESULTS}/{{view}}search/{{run}}/shard-{{shard}}-of-{{shards}}.run"
ARMS_SHARD = f"{RESULTS}/{{view}}search-arms/shard-{{shard}}-of-{{shards}}.parquet"  # shared by every family run
STATUS_SHARD = f"{RESULTS}/{{view}}search/{{run}}/shard-{{shard}}-of-{{shards}}.status.json"
# the lib lane's arms: what each hybrid search fused (core.lane_arms), beside its run's shard
LANE_ARMS_SHARD = f"{RESULTS}/{{view}}search/{{run}}/shard-{{shard}}-of-{{shards}}.arms.parquet"
RUN = f"{RESULTS}/{{view}}runs/{{run}}.run"
METRICS = f"{RESULTS}/{{view}}metrics/{{run}}.json"
BINARY_FINGERPRINT = f"{RESULTS}/fingerprints/vipune-{{binary}}.json"
LANE_FINGERPRINT = f"{RESULTS}/fingerprints/vipune-lane-{{lane_build}}.json"  # the vipune-lane beside a binary
PREFLIGHT = f"{RESULTS}/preflight/vipune-{{binary}}.json"
PLOT = f"{RESULTS}/plots/{{plot}}.png"  # stages.report.plots.PLOTS names them
VIPUNE_CACHE = f"{RESULTS}/{{view}}search/vipune-{{binary}}/cache"  # finished personas, for a resume


class _Keep(dict[str, object]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def fill(pattern: str, **values: object) -> str:
    """``pattern`` with the given wildcards filled and the others left for Snakemake."""
    return string.Formatter().vformat(pattern, (), _Keep(values))


def binary_fingerprint_file(binary_id: str) -> str:
    return fill(BINARY_FINGERPRINT, binary=binary_id)


def preflight(binary_id: str) -> str:
    return fill(PREFLIGHT, binary=binary_id)


def vipune_run(binary_id: str, semantic: bool = False) -> str:
    """Run name of a binary's hybrid search, or of its ``--no-hybrid`` search."""
    return f"vipune-{binary_id}" + ("-semantic" if semantic else "")


def lane_fingerprint_file(lane_id: str) -> str:
    return fill(LANE_FINGERPRINT, lane_build=lane_id)


def lib_run(lane_id: str, semantic: bool = False) -> str:
    """Run name of the lib lane's hybrid search (vipune-lib) with a vipune-lane, or of its semantic search."""
    return f"vipune-lib-{lane_id}" + ("-semantic" if semantic else "")


def fingerprinted_binaries(results: Path = Path(RESULTS)) -> dict[str, dict[str, Any]]:
    """Fingerprint id → fingerprint of every build evaluated in this directory: each binary, and
    each vipune-lane built alone (``lane_only``: build.sh --lane-only)."""
    found = {}
    for path in sorted((results / "fingerprints").glob("vipune-*.json")):
        try:
            fingerprint = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(fingerprint, dict) and (fingerprint.get("kind") == "vipune" or fingerprint.get("lane_only")):
            found[fingerprint["id"]] = fingerprint
    return found


def fingerprinted_lanes(binary_id: str, lane_source: str, results: Path = Path(RESULTS)) -> list[dict[str, Any]]:
    """The fingerprints of the lanes built from ``lane_source`` (the sha256 of lane/) beside the
    binary ``binary_id`` that this directory evaluated, by id."""
    found = []
    for path in sorted((results / "fingerprints").glob("vipune-lane-*.json")):
        try:
            fingerprint = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if (
            isinstance(fingerprint, dict)
            and fingerprint.get("binary") == binary_id
            and (fingerprint.get("built") or {}).get("lane_source") == lane_source
        ):
            found.append(fingerprint)
    return found


def job_tmp(*parts: str) -> str:
    """A job's own scratch folder (named after its output, so a rerun finds and clears it)."""
    return "/".join([TMP, *[p.strip("/") for p in parts if p]])


SHARD = "shard-{shard}-of-{shards}"  # one shard of a job's work, in its log's and benchmark's names


def _of_rule(root: str, suffix: str, rule: str, parts: tuple[str, ...], per_view: bool) -> str:
    return f"{root}/{'{view}' if per_view else ''}" + "/".join([rule, *parts]) + suffix


def log(rule: str, *parts: str, per_view: bool = True) -> str:
    """A rule's log: results/logs/[{view}]<rule>[/<part>...].log (a job per view and shard has
    the wildcards in ``parts``: ``log("embed", SHARD)``)."""
    return _of_rule(f"{RESULTS}/logs", ".log", rule, parts, per_view)


def benchmark(rule: str, *parts: str, per_view: bool = True) -> str:
    """A rule's benchmark file, beside its log under results/benchmarks/ (``log``'s names)."""
    return _of_rule(f"{RESULTS}/benchmarks", ".tsv", rule, parts, per_view)
