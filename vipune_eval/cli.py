"""``vipune-eval <stage>``: one subcommand per workflow stage, so each runs by hand too."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from .io import EvalError, read_json, write_json_if_changed


def _expected(args: argparse.Namespace) -> dict[str, int] | None:
    given = {"instances": args.expected_instances, "abstention": args.expected_abstention,
             "pairs": args.expected_pairs}
    return None if all(v is None for v in given.values()) else {k: v for k, v in given.items() if v is not None}


def cmd_download_dataset(a: argparse.Namespace) -> None:
    from .sources import download_dataset
    download_dataset(a.repo_id, a.filename, a.revision, a.sha256, a.dest, a.fingerprint_out)


def cmd_download_model(a: argparse.Namespace) -> None:
    from .sources import download_model, model_fingerprint
    model_dir = download_model(a.repo_id, a.revision, a.file, a.dest)
    write_json_if_changed(a.fingerprint_out, model_fingerprint(
        model_dir, repo_id=a.repo_id, revision=a.revision, file=a.file, pooling=a.pooling,
        cache_file=a.dest / ".sha256-cache.json"))


def cmd_vipune_home(a: argparse.Namespace) -> None:
    from .sources import build_vipune_hf_home
    build_vipune_hf_home(a.model_dir, a.file, a.repo_id, a.revision, a.out)


def cmd_check_binary(a: argparse.Namespace) -> None:
    from .sources import resolve_binary
    resolve_binary(a.binary)


def cmd_filter(a: argparse.Namespace) -> None:
    from .filter import FilterOutputs, run_filter
    run_filter(a.dataset, FilterOutputs(a.pairs, a.texts, a.qrels, a.summary, a.official_pairs,
                                        a.official_qrels), _expected(a))


def cmd_embed(a: argparse.Namespace) -> None:
    from .embed import run_embed
    run_embed(a.texts, a.model_dir, a.file, a.pooling, a.shard, a.shards, a.out, a.threads,
              a.batch_size, cuda=a.cuda)


def cmd_search_reference(a: argparse.Namespace) -> None:
    from .reference import run_reference
    if len(a.retrievers) != len(a.outputs):
        raise EvalError("--retrievers and --outputs need one output per retriever")
    run_reference(a.pairs, a.texts, a.embeddings, a.shard, a.shards, a.retrievers, a.limit, a.outputs)


def _configured_binary(a: argparse.Namespace) -> Path:
    """The executable behind ``--fingerprint`` (empty when the workflow knows no path for it)."""
    from .sources import resolve_binary
    if not a.binary:
        raise EvalError(f"no vipune binary is configured for {a.fingerprint}: set vipune.binary or "
                        "vipune.baseline to its path to (re)compute its results")
    return resolve_binary(a.binary)


def cmd_search_vipune(a: argparse.Namespace) -> None:
    from .vipune import run_vipune
    run_vipune(a.pairs, a.texts, a.embeddings, a.shard, a.shards, _configured_binary(a),
               a.fingerprint, a.hf_home, a.limit, a.threads, a.timeout, a.on_error, a.cache,
               a.out, a.status_out)


def cmd_preflight(a: argparse.Namespace) -> None:
    from .preflight import run_preflight
    run_preflight(_configured_binary(a), a.fingerprint, a.hf_home, a.model_dir, a.file, a.pooling,
                  a.timeout, a.out)


def cmd_score(a: argparse.Namespace) -> None:
    import pyarrow.parquet as pq
    from .score import run_score
    pairs = pq.read_table(a.pairs, columns=["question_id", "question_type"]).to_pylist()
    categories = {p["question_id"]: p["question_type"] for p in pairs}
    failed, seconds = {}, {}
    for status in a.status or []:
        shard = read_json(status)
        failed.update(shard["failed"])
        seconds.update(shard["search_seconds"])
    run_score(a.qrels, categories, a.runs, a.ks, a.name, a.run_out, a.metrics_out, failed, seconds)


def cmd_report(a: argparse.Namespace) -> None:
    from .report import ReportInputs, run_report
    metrics = dict(zip(a.names, a.metrics, strict=True))
    run_report(ReportInputs(
        summary=a.summary, qrels=a.qrels, pairs=a.pairs, embeddings=a.embeddings, metrics=metrics,
        dataset_fp=a.dataset_fp, model_fp=a.model_fp, config=a.config, ks=a.ks, vipune_fp=a.vipune_fp,
        preflight=a.preflight, baseline_fp=a.baseline_fp, baseline_metrics=a.baseline_metrics,
        official_qrels=a.official_qrels,
        official_metrics=dict(zip(a.names, a.official_metrics, strict=True)) if a.official_metrics else None),
        a.out_json, a.out_md)


def cmd_plots(a: argparse.Namespace) -> None:
    from .plots import run_plots
    run_plots(a.report, a.ks, a.limit, {"recall": a.recall, "categories": a.categories, "ranks": a.ranks})


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vipune-eval", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("download-dataset", help="fetch the LongMemEval file from the hub, verify sha256")
    s.add_argument("--repo-id", required=True)
    s.add_argument("--filename", required=True)
    s.add_argument("--revision", required=True)
    s.add_argument("--sha256")
    s.add_argument("--dest", type=Path, required=True)
    s.add_argument("--fingerprint-out", type=Path, required=True)
    s.set_defaults(func=cmd_download_dataset)

    s = sub.add_parser("download-model", help="fetch the model files at the pinned revision")
    s.add_argument("--repo-id", required=True)
    s.add_argument("--revision", required=True)
    s.add_argument("--file", required=True)
    s.add_argument("--pooling", required=True)
    s.add_argument("--dest", type=Path, required=True)
    s.add_argument("--fingerprint-out", type=Path, required=True)
    s.set_defaults(func=cmd_download_model)

    s = sub.add_parser("vipune-home", help="lay the model out as the hf-hub cache vipune reads")
    s.add_argument("--model-dir", type=Path, required=True)
    s.add_argument("--file", required=True)
    s.add_argument("--repo-id", required=True)
    s.add_argument("--revision", required=True)
    s.add_argument("--out", type=Path, required=True)
    s.set_defaults(func=cmd_vipune_home)

    s = sub.add_parser("check-binary", help="fail with a clear message when vipune is not found")
    s.add_argument("--binary", required=True)
    s.set_defaults(func=cmd_check_binary)

    s = sub.add_parser("filter", help="stream the dataset into pairs, unique texts and qrels")
    s.add_argument("--dataset", type=Path, required=True)
    s.add_argument("--pairs", type=Path, required=True)
    s.add_argument("--texts", type=Path, required=True)
    s.add_argument("--qrels", type=Path, required=True)
    s.add_argument("--summary", type=Path, required=True)
    s.add_argument("--official-pairs", type=Path, help="also write LongMemEval's own protocol")
    s.add_argument("--official-qrels", type=Path)
    for key in ("instances", "abstention", "pairs"):
        s.add_argument(f"--expected-{key}", type=int)
    s.set_defaults(func=cmd_filter)

    s = sub.add_parser("embed", help="embed one shard of the unique texts to Parquet")
    s.add_argument("--texts", type=Path, required=True)
    s.add_argument("--model-dir", type=Path, required=True)
    s.add_argument("--file", required=True)
    s.add_argument("--pooling", required=True)
    s.add_argument("--shard", type=int, required=True)
    s.add_argument("--shards", type=int, required=True)
    s.add_argument("--threads", type=int, default=1)
    s.add_argument("--batch-size", type=int, default=32)
    s.add_argument("--cuda", action="store_true")
    s.add_argument("--out", type=Path, required=True)
    s.set_defaults(func=cmd_embed)

    for name, func in (("search-reference", cmd_search_reference), ("search-vipune", cmd_search_vipune)):
        s = sub.add_parser(name, help="run retrievers over one shard of personas")
        s.add_argument("--pairs", type=Path, required=True)
        s.add_argument("--texts", type=Path, required=True)
        s.add_argument("--embeddings", type=Path, nargs="+", required=True)
        s.add_argument("--shard", type=int, required=True)
        s.add_argument("--shards", type=int, required=True)
        s.add_argument("--limit", type=int, required=True)
        s.set_defaults(func=func)
        if name == "search-reference":
            s.add_argument("--retrievers", nargs="+", required=True)
            s.add_argument("--outputs", type=Path, nargs="+", required=True)
        else:
            s.add_argument("--binary", required=True)
            s.add_argument("--fingerprint", type=Path, required=True)
            s.add_argument("--hf-home", type=Path, required=True)
            s.add_argument("--threads", type=int, default=1)
            s.add_argument("--timeout", type=float, default=300.0)
            s.add_argument("--on-error", choices=["stop", "record"], default="stop")
            s.add_argument("--cache", type=Path, required=True,
                           help="folder of finished personas (reused when a shard reruns)")
            s.add_argument("--out", type=Path, required=True)
            s.add_argument("--status-out", type=Path, required=True)

    s = sub.add_parser("preflight", help="check a vipune binary's contract and embedding parity")
    s.add_argument("--binary", required=True)
    s.add_argument("--fingerprint", type=Path, required=True)
    s.add_argument("--hf-home", type=Path, required=True)
    s.add_argument("--model-dir", type=Path, required=True)
    s.add_argument("--file", required=True)
    s.add_argument("--pooling", required=True)
    s.add_argument("--timeout", type=float, default=300.0)
    s.add_argument("--out", type=Path, required=True)
    s.set_defaults(func=cmd_preflight)

    s = sub.add_parser("score", help="merge a retriever's run shards and compute its metrics")
    s.add_argument("--qrels", type=Path, required=True)
    s.add_argument("--pairs", type=Path, required=True)
    s.add_argument("--runs", type=Path, nargs="+", required=True)
    s.add_argument("--ks", type=int, nargs="+", required=True)
    s.add_argument("--name", required=True)
    s.add_argument("--run-out", type=Path, required=True)
    s.add_argument("--metrics-out", type=Path, required=True)
    s.add_argument("--status", type=Path, nargs="*", help="status files listing failed pairs")
    s.set_defaults(func=cmd_score)

    s = sub.add_parser("report", help="collect metrics and provenance into report.json / report.md")
    s.add_argument("--summary", type=Path, required=True)
    s.add_argument("--qrels", type=Path, required=True)
    s.add_argument("--pairs", type=Path, required=True)
    s.add_argument("--embeddings", type=Path, nargs="+", required=True)
    s.add_argument("--names", nargs="+", required=True)
    s.add_argument("--metrics", type=Path, nargs="+", required=True)
    s.add_argument("--dataset-fp", type=Path, required=True)
    s.add_argument("--model-fp", type=Path, required=True)
    s.add_argument("--vipune-fp", type=Path)
    s.add_argument("--preflight", type=Path)
    s.add_argument("--official-qrels", type=Path)
    s.add_argument("--official-metrics", type=Path, nargs="+")
    s.add_argument("--baseline-fp", type=Path)
    s.add_argument("--baseline-metrics", type=Path)
    s.add_argument("--config", type=Path, required=True)
    s.add_argument("--ks", type=int, nargs="+", required=True)
    s.add_argument("--out-json", type=Path, required=True)
    s.add_argument("--out-md", type=Path, required=True)
    s.set_defaults(func=cmd_report)

    s = sub.add_parser("plots", help="PNG plots of a report")
    s.add_argument("--report", type=Path, required=True)
    s.add_argument("--ks", type=int, nargs="+", required=True)
    s.add_argument("--limit", type=int, required=True)
    s.add_argument("--recall", type=Path, required=True)
    s.add_argument("--categories", type=Path, required=True)
    s.add_argument("--ranks", type=Path, required=True)
    s.set_defaults(func=cmd_plots)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(message)s")
    try:
        args.func(args)
    except EvalError as exc:
        print(f"vipune-eval {args.command}: error: {exc}", file=sys.stderr)
        return 1
    return 0
