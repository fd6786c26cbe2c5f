"""report: the numbers, their intervals, paired comparisons, diagnostics and provenance, as JSON
for scripts and Markdown for people."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from . import __version__, diagnostics
from .io import atomic_path, read_json, write_json
from .score import metric_keys, read_qrels
from .stats import compare_runs

PRIMARY_K = 5  # the k of the headline comparisons and diagnostics (the middle of 1, 5, 10)


@dataclass
class ReportInputs:
    summary: Path
    qrels: Path
    pairs: Path
    embeddings: list[Path]
    metrics: dict[str, Path]          # retriever name → its metrics JSON
    dataset_fp: Path
    model_fp: Path
    config: Path
    ks: list[int]
    vipune_fp: Path | None = None
    preflight: Path | None = None
    baseline_fp: Path | None = None
    baseline_metrics: Path | None = None
    official_qrels: Path | None = None
    official_metrics: dict[str, Path] | None = None  # the second view (protocol: official)


def changes(current: dict[str, Any], baseline: dict[str, Any], gold: dict[str, set[str]],
            ks: list[int]) -> list[dict[str, Any]]:
    """Pairs whose gold sessions in the top k differ between the baseline and the current run."""
    out = []
    for qid in sorted(set(current["per_query"]) & set(baseline["per_query"])):
        relevant = gold[qid]
        now, before = current["per_query"][qid]["ranked"], baseline["per_query"][qid]["ranked"]
        entry: dict[str, Any] = {}
        for k in ks:
            found_now, found_before = relevant & set(now[:k]), relevant & set(before[:k])
            if found_now != found_before:
                entry[f"gained@{k}"] = sorted(found_now - found_before)
                entry[f"lost@{k}"] = sorted(found_before - found_now)
                entry[f"recall@{k}"] = [len(found_before) / len(relevant), len(found_now) / len(relevant)]
        if entry:
            out.append({"question_id": qid, "question_type": current["per_query"][qid]["question_type"],
                        **entry})
    return out


def comparison(a: dict[str, Any], b: dict[str, Any], ks: list[int], name_a: str, name_b: str) -> dict[str, Any]:
    """Paired comparison of two runs on the pairs both scored (failed pairs drop out of both)."""
    keys = metric_keys(ks)
    shared = sorted(set(a["per_query"]) & set(b["per_query"]))
    rows_a = {q: {k: a["per_query"][q][k] for k in keys} for q in shared}
    rows_b = {q: {k: b["per_query"][q][k] for k in keys} for q in shared}
    categories = {q: a["per_query"][q]["question_type"] for q in shared}
    return compare_runs(rows_a, rows_b, keys, categories, name_a=name_a, name_b=name_b)


def retriever_entry(m: dict[str, Any]) -> dict[str, Any]:
    entry = {"run": m["run"], "pairs": m["pairs"], "failed": m["failed"], "metrics": m["metrics"],
             "intervals": m["intervals"], "per_category": m["per_category"]}
    if "search_seconds" in m:
        entry["search_seconds"] = m["search_seconds"]
    return entry


def build_report(inputs: ReportInputs) -> dict[str, Any]:
    ks = inputs.ks
    k = PRIMARY_K if PRIMARY_K in ks else max(ks)
    summary = read_json(inputs.summary)
    metrics = {name: read_json(path) for name, path in inputs.metrics.items()}
    gold = {qid: set(docs) for qid, docs in read_qrels(inputs.qrels).items()}
    pairs = pq.read_table(inputs.pairs, columns=["question_id", "gold", "session_ids",
                                                 "session_text_ids"]).to_pylist()
    report: dict[str, Any] = {
        "pairs": summary["pairs"],
        "qrels": str(inputs.qrels),
        "dataset": summary,
        "retrievers": {name: retriever_entry(m) for name, m in metrics.items()},
    }
    subject = "vipune" if "vipune" in metrics else next(iter(metrics))
    report["comparisons"] = {
        f"{subject} vs {other}": comparison(metrics[subject], metrics[other], ks, subject, other)
        for other in metrics if other != subject}
    if inputs.baseline_fp and inputs.baseline_metrics:
        before = read_json(inputs.baseline_metrics)
        report["baseline"] = {
            "vipune": read_json(inputs.baseline_fp), **retriever_entry(before),
            "comparison": comparison(metrics["vipune"], before, ks, "vipune", "baseline"),
            "changes": changes(metrics["vipune"], before, gold, ks)}
    if inputs.official_metrics:
        report["official"] = {
            "protocol": "LongMemEval's retrieval protocol: rows hold user turns only; gold keeps the "
                        "answer sessions with a user-side has_answer turn; pairs without such gold "
                        "are skipped. Its published Recall@k is recall_all@k here.",
            **summary["official"], "qrels": str(inputs.official_qrels),
            "retrievers": {name: retriever_entry(read_json(path))
                           for name, path in inputs.official_metrics.items()}}
    report["diagnostics"] = {
        "truncation": diagnostics.truncation(pairs, inputs.embeddings, metrics, k),
        "bm25_and_query": diagnostics.empty_and_query(metrics, k),
        "vipune_vs_hybrid": diagnostics.agreement(metrics, ks),
        "gold_ranks": {"retriever": subject, "pairs": diagnostics.gold_ranks(metrics[subject], gold, k)},
    }
    report["provenance"] = {
        "dataset": read_json(inputs.dataset_fp), "model": read_json(inputs.model_fp),
        "vipune": read_json(inputs.vipune_fp) if inputs.vipune_fp else None,
        "preflight": read_json(inputs.preflight) if inputs.preflight else None,
        "config": read_json(inputs.config),
        "package": {"name": "vipune-eval", "version": __version__},
    }
    return report


def _cell(value: float, interval: list[float] | None = None) -> str:
    if interval is None:
        return f"{value:.3f}"
    return f"{value:.3f} [{interval[0]:.2f}, {interval[1]:.2f}]"


def markdown(report: dict[str, Any], ks: list[int]) -> str:
    keys = metric_keys(ks)
    k = PRIMARY_K if PRIMARY_K in ks else max(ks)
    prov = report["provenance"]
    lines = ["# vipune-eval report", ""]
    vipune = prov.get("vipune")
    if vipune:
        lines.append(f"- vipune {vipune['version']} (binary sha256 {vipune['sha256'][:12]})")
    model = prov["model"]
    local = prov["config"].get("model", {}).get("path")
    source = f"files from {local} laid out as " if local else ""
    lines.append(f"- model: {source}{model['repo_id']}@{model['revision'][:12]} `{model['file']}` "
                 f"(sha256 {model['files'][model['file']][:12]}), {model['pooling']} pooling + L2")
    data = prov["dataset"]
    lines.append(f"- dataset {data.get('repo_id') or 'local file'} {data.get('filename') or ''} "
                 f"(sha256 {data['sha256'][:12]}): {report['pairs']} pairs")
    rows = dict(report["retrievers"])
    baseline = report.get("baseline")
    if baseline:
        rows[f"vipune baseline {baseline['vipune']['id']}"] = baseline
    lines += ["", "## Overall (95% intervals in brackets)", "",
              "| retriever | pairs | " + " | ".join(keys) + " |", "|---|---:|" + "---:|" * len(keys)]
    for name, entry in rows.items():
        failed = f" ({len(entry['failed'])} failed)" if entry["failed"] else ""
        cells = [_cell(entry["metrics"][key], entry["intervals"][key]) for key in keys]
        lines.append(f"| {name} | {entry['pairs']}{failed} | " + " | ".join(cells) + " |")
    categories = sorted({c for e in rows.values() for c in e["per_category"]})
    for key in [f"recall@{k}" for k in ks]:
        lines += ["", f"## {key} per category", "",
                  "| retriever | " + " | ".join(categories) + " |", "|---|" + "---:|" * len(categories)]
        for name, entry in rows.items():
            cells = [_cell(entry["per_category"][c][key], entry["per_category"][c]["intervals"][key])
                     if c in entry["per_category"] else "–" for c in categories]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    comparisons = dict(report["comparisons"])
    if baseline:
        comparisons["vipune vs baseline"] = baseline["comparison"]
    lines += ["", "## Paired comparisons", "",
              "Differences on the same pairs, with paired-bootstrap intervals; exact McNemar tests for "
              "recall_any/recall_all, paired randomization tests otherwise; Holm-corrected over every "
              "metric and category of a comparison.", ""]
    for label, result in comparisons.items():
        lines.append(f"**{label}**")
        lines += [f"- {sentence}" for sentence in result["summary"]]
        lines.append("")
    if baseline:
        lines += [f"## Pairs that changed against the baseline ({len(baseline['changes'])})", "",
                  "| question | category | " + " | ".join(f"recall@{k} before → now" for k in ks) + " |",
                  "|---|---|" + "---|" * len(ks)]
        for change in baseline["changes"]:
            cells = [" → ".join(f"{v:.2f}" for v in change[f"recall@{k}"]) if f"recall@{k}" in change
                     else "=" for k in ks]
            lines.append(f"| {change['question_id']} | {change['question_type']} | " + " | ".join(cells) + " |")
        lines.append("")
    official = report.get("official")
    if official:
        shown = [f"recall_all@{k}" for k in ks] + [f"recall@{k}" for k in ks]
        lines += ["## Second view: LongMemEval's own protocol", "",
                  f"{official['protocol']} {official['pairs']} pairs "
                  f"({official['skipped_without_user_side_gold']} skipped).", "",
                  "| retriever | pairs | " + " | ".join(shown) + " |", "|---|---:|" + "---:|" * len(shown)]
        for name, entry in official["retrievers"].items():
            cells = [_cell(entry["metrics"][key], entry["intervals"][key]) for key in shown]
            lines.append(f"| {name} | {entry['pairs']} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += diagnostics_markdown(report, ks, k)
    counts = report["dataset"]["per_category"]
    lines += ["", "Pairs per category: " + ", ".join(f"{c} {n}" for c, n in counts.items()),
              "", "recall@k = |gold ∩ top-k| / |gold| averaged over pairs (the primary number); "
              "recall_any@k: at least one gold session in the top k; recall_all@k: all of them. "
              "Failed pairs (vipune.on_error: record) are left out of every average.", ""]
    return "\n".join(lines)


def diagnostics_markdown(report: dict[str, Any], ks: list[int], k: int) -> list[str]:
    d = report["diagnostics"]
    t = d["truncation"]
    lines = ["## Diagnostics", "",
             f"- {t['truncated_share']:.1%} of the {t['session_texts']} session texts are over 512 tokens "
             f"(embedded truncated; vipune's own `add` would refuse them); {t['pairs_with_truncated_gold']} "
             f"pairs have a truncated gold session."]
    for name, split in t[f"recall@{k}"].items():
        if split["truncated_gold"] is not None:
            lines.append(f"  - {name}: recall@{k} {_opt(split['truncated_gold'])} with truncated gold, "
                         f"{_opt(split['untruncated_gold'])} without")
    bm25 = d["bm25_and_query"]
    if bm25:
        lines.append(f"- vipune's AND query finds nothing for {bm25['bm25_empty_share']:.1%} of the questions "
                     f"({bm25['bm25_empty_pairs']} pairs); there hybrid search is the semantic order.")
        if f"hybrid_vs_hybrid_or_top{k}_differs" in bm25:
            on_empty = bm25[f"recall@{k}_on_empty_and_pairs"]
            lines.append(f"  - hybrid and hybrid-or differ in the top {k} of "
                         f"{bm25[f'hybrid_vs_hybrid_or_top{k}_differs']} pairs; on the empty-AND pairs "
                         f"recall@{k} is {_opt(on_empty['hybrid'])} (AND) vs {_opt(on_empty['hybrid-or'])} (OR).")
    agree = d["vipune_vs_hybrid"]
    if agree:
        shares = ", ".join(f"top {k}: {agree[f'same_top{k}_share']:.1%}" for k in ks)
        lines.append(f"- vipune and its mirror `hybrid` return the same ranking on {shares} of "
                     f"{agree['pairs']} pairs. A large disagreement means the binary no longer does "
                     f"what its contract says.")
    seconds = report["retrievers"].get("vipune", {}).get("search_seconds")
    if seconds:
        lines.append(f"- vipune search latency (per query, subprocess included): p50 {seconds['p50']:.3f} s, "
                     f"p95 {seconds['p95']:.3f} s, max {seconds['max']:.3f} s over {seconds['calls']} calls")
    ranks = d["gold_ranks"]
    misses = [r for r in ranks["pairs"] if r[f"recall@{k}"] < 1][:20]
    lines += ["", f"### Worst pairs for {ranks['retriever']} (gold session ranks; – = not retrieved)", "",
              f"| question | category | recall@{k} | gold ranks |", "|---|---|---:|---|"]
    for r in misses:
        ranked = ", ".join(f"{g}: {rank or '–'}" for g, rank in r["gold_ranks"].items())
        lines.append(f"| {r['question_id']} | {r['question_type']} | {r[f'recall@{k}']:.2f} | {ranked} |")
    return lines


def _opt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def run_report(inputs: ReportInputs, out_json: Path, out_md: Path) -> dict[str, Any]:
    report = build_report(inputs)
    write_json(out_json, report)
    with atomic_path(out_md) as tmp:
        tmp.write_text(markdown(report, inputs.ks), encoding="utf-8")
    return report
