"""report: the numbers and their provenance, as JSON for scripts and Markdown for people."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import __version__
from .io import atomic_path, read_json, write_json
from .score import metric_keys, read_qrels


def changes(current: dict[str, Any], baseline: dict[str, Any], gold: dict[str, set[str]],
            categories: dict[str, str], ks: list[int]) -> list[dict[str, Any]]:
    """Pairs whose gold sessions in the top k differ between the baseline and the current run."""
    out = []
    for qid, relevant in sorted(gold.items()):
        now, before = current["per_query"][qid]["ranked"], baseline["per_query"][qid]["ranked"]
        entry: dict[str, Any] = {}
        for k in ks:
            found_now, found_before = relevant & set(now[:k]), relevant & set(before[:k])
            if found_now != found_before:
                entry[f"gained@{k}"] = sorted(found_now - found_before)
                entry[f"lost@{k}"] = sorted(found_before - found_now)
                entry[f"recall@{k}"] = [len(found_before) / len(relevant), len(found_now) / len(relevant)]
        if entry:
            out.append({"question_id": qid, "question_type": categories[qid], **entry})
    return out


def build_report(summary: dict[str, Any], qrels: Path, metrics: dict[str, dict[str, Any]],
                 provenance: dict[str, Any]) -> dict[str, Any]:
    return {
        "pairs": summary["pairs"],
        "qrels": str(qrels),
        "dataset": summary,
        "retrievers": {name: {"run": m["run"], "pairs": m["pairs"], "failed": m["failed"],
                              "metrics": m["metrics"], "per_category": m["per_category"]}
                       for name, m in metrics.items()},
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
    rows = dict(report["retrievers"])
    baseline = report.get("baseline")
    if baseline:
        rows[f"vipune baseline {baseline['vipune']['id']}"] = baseline
    lines += ["", "## Overall", "", "| retriever | " + " | ".join(keys) + " |",
              "|---|" + "---:|" * len(keys)]
    for name, entry in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{entry['metrics'][k]:.3f}" for k in keys) + " |")
    recall_keys = [f"recall@{k}" for k in ks]
    categories = sorted({c for e in report["retrievers"].values() for c in e["per_category"]})
    for key in recall_keys:
        lines += ["", f"## {key} per category", "",
                  "| retriever | " + " | ".join(f"{c}" for c in categories) + " |",
                  "|---|" + "---:|" * len(categories)]
        for name, entry in rows.items():
            cells = [f"{entry['per_category'][c][key]:.3f}" if c in entry["per_category"] else "–"
                     for c in categories]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if baseline:
        lines += ["", f"## Pairs that changed against the baseline ({len(baseline['changes'])})", "",
                  "| question | category | " + " | ".join(f"recall@{k} before → now" for k in ks) + " |",
                  "|---|---|" + "---|" * len(ks)]
        for change in baseline["changes"]:
            cells = [" → ".join(f"{v:.2f}" for v in change[f"recall@{k}"]) if f"recall@{k}" in change
                     else "=" for k in ks]
            lines.append(f"| {change['question_id']} | {change['question_type']} | " + " | ".join(cells) + " |")
    counts = {c: n for c, n in report["dataset"]["per_category"].items()}
    lines += ["", "Pairs per category: " + ", ".join(f"{c} {n}" for c, n in counts.items()),
              "", "recall@k = |gold ∩ top-k| / |gold| averaged over pairs (the primary number); "
              "recall_any@k: at least one gold session in the top k; recall_all@k: all of them.", ""]
    return "\n".join(lines)


def run_report(summary: Path, qrels: Path, metrics: dict[str, Path], dataset_fp: Path, model_fp: Path,
               vipune_fp: Path | None, config: Path, ks: list[int], out_json: Path, out_md: Path,
               baseline_fp: Path | None = None, baseline_metrics: Path | None = None,
               preflight: Path | None = None) -> dict[str, Any]:
    provenance = {"dataset": read_json(dataset_fp), "model": read_json(model_fp),
                  "vipune": read_json(vipune_fp) if vipune_fp else None,
                  "preflight": read_json(preflight) if preflight else None, "config": read_json(config)}
    loaded = {n: read_json(p) for n, p in metrics.items()}
    report = build_report(read_json(summary), qrels, loaded, provenance)
    if baseline_fp and baseline_metrics:
        before = read_json(baseline_metrics)
        gold = {qid: set(docs) for qid, docs in read_qrels(qrels).items()}
        categories = {qid: row["question_type"] for qid, row in before["per_query"].items()}
        report["baseline"] = {
            "vipune": read_json(baseline_fp), "run": before["run"], "metrics": before["metrics"],
            "per_category": before["per_category"],
            "changes": changes(loaded["vipune"], before, gold, categories, ks)}
    write_json(out_json, report)
    with atomic_path(out_md) as tmp:
        tmp.write_text(markdown(report, ks), encoding="utf-8")
    return report
