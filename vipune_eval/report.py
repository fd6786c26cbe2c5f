"""report: the numbers and their provenance, as JSON for scripts and Markdown for people."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import __version__
from .io import atomic_path, read_json, write_json
from .score import metric_keys


def build_report(summary: dict[str, Any], qrels: Path, metrics: dict[str, dict[str, Any]],
                 provenance: dict[str, Any]) -> dict[str, Any]:
    return {
        "pairs": summary["pairs"],
        "qrels": str(qrels),
        "dataset": summary,
        "retrievers": {name: {"run": m["run"], "pairs": m["pairs"], "metrics": m["metrics"],
                              "per_category": m["per_category"]} for name, m in metrics.items()},
        "provenance": {**provenance, "package": {"name": "vipune-eval", "version": __version__}},
    }


def markdown(report: dict[str, Any], ks: list[int]) -> str:
    keys = metric_keys(ks)
    prov = report["provenance"]
    lines = ["# vipune-eval report", ""]
    vipune = prov.get("vipune")
    if vipune:
        lines.append(f"- vipune {vipune['version']} (binary sha256 {vipune['sha256'][:12]})")
    model = prov["model"]
    lines.append(f"- model {model['repo_id']}@{model['revision'][:12]} `{model['file']}` "
                 f"(sha256 {model['files'][model['file']][:12]}), {model['pooling']} pooling + L2")
    data = prov["dataset"]
    lines.append(f"- dataset {data.get('repo_id') or 'local file'} {data.get('filename') or ''} "
                 f"(sha256 {data['sha256'][:12]}): {report['pairs']} pairs")
    lines += ["", "## Overall", "", "| retriever | " + " | ".join(keys) + " |",
              "|---|" + "---:|" * len(keys)]
    for name, entry in report["retrievers"].items():
        lines.append(f"| {name} | " + " | ".join(f"{entry['metrics'][k]:.3f}" for k in keys) + " |")
    recall_keys = [f"recall@{k}" for k in ks]
    categories = sorted({c for e in report["retrievers"].values() for c in e["per_category"]})
    for key in recall_keys:
        lines += ["", f"## {key} per category", "",
                  "| retriever | " + " | ".join(f"{c}" for c in categories) + " |",
                  "|---|" + "---:|" * len(categories)]
        for name, entry in report["retrievers"].items():
            cells = [f"{entry['per_category'][c][key]:.3f}" if c in entry["per_category"] else "–"
                     for c in categories]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    counts = {c: n for c, n in report["dataset"]["per_category"].items()}
    lines += ["", "Pairs per category: " + ", ".join(f"{c} {n}" for c, n in counts.items()),
              "", "recall@k = |gold ∩ top-k| / |gold| averaged over pairs (the primary number); "
              "recall_any@k: at least one gold session in the top k; recall_all@k: all of them.", ""]
    return "\n".join(lines)


def run_report(summary: Path, qrels: Path, metrics: dict[str, Path], dataset_fp: Path, model_fp: Path,
               vipune_fp: Path | None, config: Path, ks: list[int], out_json: Path,
               out_md: Path) -> dict[str, Any]:
    provenance = {"dataset": read_json(dataset_fp), "model": read_json(model_fp),
                  "vipune": read_json(vipune_fp) if vipune_fp else None, "config": read_json(config)}
    report = build_report(read_json(summary), qrels, {n: read_json(p) for n, p in metrics.items()},
                          provenance)
    write_json(out_json, report)
    with atomic_path(out_md) as tmp:
        tmp.write_text(markdown(report, ks), encoding="utf-8")
    return report
