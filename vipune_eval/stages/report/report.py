"""report: the numbers, their intervals, paired comparisons, diagnostics and provenance, as JSON
for scripts and Markdown for people.

Its inputs come from a manifest (written at parse time, see workspace.report_manifest) that
names every view, every run's metrics and every build; ``build_report`` turns them into
``report.json``, ``markdown`` into ``report.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from vipune_eval import __version__
from vipune_eval.stages.report import diagnostics, whatif
from vipune_eval.registry import measures
from vipune_eval.stages.embed.tally import read_tallies
from vipune_eval.stages.report import projection
from vipune_eval.core.io import atomic_path, read_json, write_json
from vipune_eval.core.stats import adjust_family, compare_runs
from vipune_eval.core.trec import read_qrels
from vipune_eval.registry.views import PRIMARY

# LongMemEval's paper, LongMemEval_M, value = session, key = value; numbers NOT read from the paper
# here (it cannot be fetched on these machines) but as quoted from its Table 9 in the project's
# GitHub issue xiaowu0162/LongMemEval#27. "Recall" there is LongMemEval's recall_all, and its
# figures are print_retrieval_metrics.py's averages over every non-abstention pair: our
# `metrics_all` of the bm25-lme retriever (LongMemEval's own BM25) is the number beside them.
PUBLISHED = {
    "source": "LongMemEval paper (Wu et al., ICLR 2025), Table 9, LongMemEval_M, value = session, "
              "key = V, as quoted in github.com/xiaowu0162/LongMemEval/issues/27 — not checked "
              "against the paper here; Contriever and Stella figures were not available",
    "corpus": "the paper's: LongMemEval_M of the original release (xiaowu0162/longmemeval, "
              "longmemeval_m.json), every non-abstention pair (print_retrieval_metrics.py)",
    "retrievers": {"BM25 (rank_bm25)": {"recall_all@5": 0.634, "recall_all@10": 0.710,
                                        "ndcg_any@5": 0.516, "ndcg_any@10": 0.540}},
    "ours": {"BM25 (rank_bm25)": "bm25-lme"},  # the configured retriever that reproduces each row
}


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


def comparison(a: dict[str, Any], b: dict[str, Any], keys: list[str], name_a: str, name_b: str) -> dict[str, Any]:
    """Paired comparison of two runs on the pairs both scored (failed pairs drop out of both)."""
    shared = sorted(set(a["per_query"]) & set(b["per_query"]))
    rows_a = {q: {k: a["per_query"][q][k] for k in keys} for q in shared}
    rows_b = {q: {k: b["per_query"][q][k] for k in keys} for q in shared}
    categories = {q: a["per_query"][q]["question_type"] for q in shared}
    return compare_runs(rows_a, rows_b, keys, categories, name_a=name_a, name_b=name_b)


def retriever_entry(m: dict[str, Any]) -> dict[str, Any]:
    entry = {"run": m["run"], "pairs": m["pairs"], "failed": m["failed"], "metrics": m["metrics"],
             "intervals": m["intervals"], "per_category": m["per_category"],
             "short_lists": m["short_lists"]}
    if "metrics_all" in m:  # the official protocol's second question set
        entry.update({k: m[k] for k in ("pairs_all", "metrics_all", "intervals_all")})
    if "search_seconds" in m:
        entry["search_seconds"] = m["search_seconds"]
    return entry


def _view_counts(view: dict[str, Any]) -> dict[str, int]:
    rows = pq.read_table(view["rows"], columns=["row_keys"]).column("row_keys")
    tokens = texts = 0
    for path in view["embeddings"]:
        column = pq.read_table(path, columns=["tokens"]).column("tokens")
        tokens += int(sum(column.to_pylist()))
        texts += len(column)
    return {"rows": sum(len(r) for r in rows.to_pylist()), "unique_texts": texts, "tokens_embedded": tokens}


def _view_block(view: dict[str, Any], metrics: dict[str, dict[str, Any]]) -> dict[str, Any]:
    summary = read_json(view["summary"])
    return {"protocol": view["protocol"], "granularity": view["granularity"],
            "description": view["description"], "ks": view["ks"], "pairs": summary["pairs"],
            "qrels": view["qrels"], "summary": summary, "measures": measures.definitions(view["measures"]),
            **_view_counts(view),
            "retrievers": {name: retriever_entry(m) for name, m in metrics.items()}}


def build_report(manifest: dict[str, Any]) -> dict[str, Any]:
    primary = manifest["views"][0]
    ks = primary["ks"]
    keys = measures.keys(ks, primary["measures"])
    k = measures.primary_k(ks)
    summary = read_json(primary["summary"])
    view_metrics = [{name: read_json(path) for name, path in view["metrics"].items()}
                    for view in manifest["views"]]
    metrics = view_metrics[0]
    gold = {qid: set(docs) for qid, docs in read_qrels(primary["qrels"]).items()}
    report: dict[str, Any] = {
        "pairs": summary["pairs"], "qrels": primary["qrels"], "protocol": primary["description"],
        "measures": measures.definitions(primary["measures"]), "dataset": summary,
        "retrievers": {name: retriever_entry(m) for name, m in metrics.items()},
        "retriever_settings": manifest.get("settings", {}),
        "corpus": manifest.get("corpus"),
    }
    subject = "vipune" if "vipune" in metrics else next(iter(metrics))
    report["comparisons"] = {f"{subject} vs {other}": comparison(metrics[subject], metrics[other], keys, subject, other)
                             for other in metrics if other != subject}
    report["views"] = {view["name"]: _view_block(view, m) for view, m in zip(manifest["views"], view_metrics)}
    report["builds"] = builds(manifest, metrics, keys, ks, gold)
    entry = next((b for b in report["builds"][1:] if b["id"] == manifest.get("baseline")), None)
    if entry:
        report["baseline"] = {"vipune": read_json(manifest["fingerprints"][entry["id"]]), **entry}
    report["splits"] = {name: {"pairs": summary["split"][name], "retrievers": {
        r: {"metrics": {key: m["per_split"][name][key] for key in keys},
            "intervals": m["per_split"][name]["intervals"]} for r, m in metrics.items() if name in m["per_split"]}}
        for name in ("dev", "test")}
    report["granularities"] = granularities(manifest, view_metrics, keys)
    if manifest.get("whatif"):
        report["whatif"] = whatif_block(manifest["whatif"], metrics)
    official = [(v, m) for v, m in zip(manifest["views"], view_metrics) if v["protocol"] == "official"]
    if official and official[0][0]["granularity"] == PRIMARY.granularity:
        view, m = official[0]
        block = report["views"][view["name"]]
        report["official"] = {"protocol": view["description"], "pairs": block["pairs"],
                              "skipped_without_user_side_evidence": block["summary"]["skipped_without_user_side_evidence"],
                              "pairs_with_empty_gold": block["summary"]["pairs_with_empty_gold"],
                              "skip_rule": block["summary"]["skip_rule"], "qrels": view["qrels"],
                              "pairs_all": block["summary"]["pairs_all"],
                              "ks": view["ks"], "measures": block["measures"], "retrievers": block["retrievers"],
                              "published": PUBLISHED,
                              "beside_published": beside_published(block["retrievers"], report.get("corpus"))}
    mirrors, roles = manifest["mirrors"], manifest["roles"]
    report["diagnostics"] = {
        "truncation": diagnostics.truncation(_rows_with_gold(primary), primary["embeddings"], metrics, k),
        "bm25_and_query": diagnostics.empty_and_query(metrics, k, roles),
        "vipune_vs_hybrid": diagnostics.agreement(metrics, ks, "vipune", mirrors.get("vipune")),
        "vipune_semantic_vs_dense": diagnostics.agreement(metrics, ks, "vipune-semantic",
                                                          mirrors.get("vipune-semantic")),
        "gold_ranks": {"retriever": subject, "pairs": diagnostics.gold_ranks(metrics[subject], gold, k)},
    }
    report["embed"] = projection.summary(read_tallies(
        list(dict.fromkeys(p for view in manifest["views"] for p in view["embeddings"]))), projection.LONGMEMEVAL_M)
    report["provenance"] = {
        "dataset": read_json(manifest["dataset_fp"]), "model": read_json(manifest["model_fp"]),
        "vipune": read_json(manifest["fingerprints"][manifest["primary"]]) if manifest.get("primary") else None,
        "preflight": read_json(manifest["preflight"][manifest["primary"]]) if manifest.get("primary") else None,
        "builds": {b: read_json(path) for b, path in manifest["fingerprints"].items()},
        "split": {"seed": summary["split"]["seed"], "dev_fraction": summary["split"]["dev_fraction"],
                  "rule": "per category, pairs ordered by sha256(seed, question_id); the first "
                          "round(dev_fraction × n) are dev"},
        "views": {view["name"]: view["description"] for view in manifest["views"]},
        "config": read_json(manifest["config"]),
        "package": {"name": "vipune-eval", "version": __version__},
    }
    return report


def whatif_block(lab: dict[str, Any], metrics: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The what-if grid chosen on one split and confirmed on the other (vipune_eval.whatif)."""
    def run(entry: dict[str, Any]) -> dict[str, Any]:
        m = metrics.get(entry["name"]) or read_json(entry["metrics"])
        return {"name": entry["name"], "params": entry["params"], "run": entry["run"],
                "per_query": m["per_query"]}

    block = whatif.analyse(lab["measure"], lab["select_on"], run(lab["base"]),
                           [run(v) for v in lab["variants"]])
    return {**block, "grid": lab["grid"]}


def _rows_with_gold(view: dict[str, Any]) -> list[dict[str, Any]]:
    rows = pq.read_table(view["rows"], columns=["question_id", "row_sessions", "row_text_ids"]).to_pylist()
    gold = {p["question_id"]: p["gold"] for p in
            pq.read_table(view["pairs"], columns=["question_id", "gold"]).to_pylist()}
    return [{**r, "gold": gold[r["question_id"]]} for r in rows]


def builds(manifest: dict[str, Any], metrics: dict[str, dict[str, Any]], keys: list[str],
           ks: list[int], gold: dict[str, set[str]]) -> list[dict[str, Any]]:
    """One entry per vipune build, the primary first; the others compared with the primary, Holm
    over every comparison of every build."""
    if not manifest.get("primary") or "vipune" not in metrics:
        return []
    paths = manifest["views"][0]["builds"]  # the order is the configuration's (vipune.compare)
    runs = {manifest["primary"]: metrics["vipune"], **{b: read_json(paths[b]) for b in manifest["builds"]}}
    out = []
    for build, m in runs.items():
        fingerprint = read_json(manifest["fingerprints"][build])
        entry = {"id": build, "version": fingerprint["version"], "sha256": fingerprint["sha256"],
                 **retriever_entry(m)}
        if build in manifest["preflight"]:
            preflight = read_json(manifest["preflight"][build])
            entry["follows_contract"] = preflight.get("follows_contract", True)
            entry["failed_checks"] = preflight.get("failed_checks", [])
        out.append(entry)
    primary = runs[manifest["primary"]]
    compared = adjust_family({b: comparison(m, primary, keys, b, manifest["primary"])
                              for b, m in runs.items() if b != manifest["primary"]})
    for entry in out[1:]:
        entry["comparison"] = compared[entry["id"]]
        entry["changes"] = changes(runs[entry["id"]], primary, gold, ks)
    return out


def granularities(manifest: dict[str, Any], view_metrics: list[dict[str, dict[str, Any]]],
                  keys: list[str]) -> dict[str, Any]:
    """The seed protocol's granularities side by side; each against session, per retriever."""
    seed = [(v, m) for v, m in zip(manifest["views"], view_metrics) if v["protocol"] == "seed"]
    if len(seed) < 2:
        return {}
    session = seed[0][1]
    out: dict[str, Any] = {}
    for view, m in seed:
        counts = _view_counts(view)
        out[view["granularity"]] = {"pairs": read_json(view["summary"])["pairs"], **counts,
                                    "retrievers": {name: retriever_entry(e) for name, e in m.items()}}
        if view["granularity"] != PRIMARY.granularity:
            out[view["granularity"]]["vs_session"] = {
                name: comparison(e, session[name], keys, f"{name} ({view['granularity']})", f"{name} (session)")
                for name, e in m.items() if name in session}
    return out


def _cell(value: float, interval: list[float] | None = None) -> str:
    if interval is None:
        return f"{value:.3f}"
    return f"{value:.3f} [{interval[0]:.2f}, {interval[1]:.2f}]"


def _table(rows: dict[str, dict[str, Any]], keys: list[str], pairs_column: bool = True) -> list[str]:
    head = "| retriever | " + ("pairs | " if pairs_column else "") + " | ".join(keys) + " |"
    lines = [head, "|---|" + ("---:|" if pairs_column else "") + "---:|" * len(keys)]
    for name, entry in rows.items():
        failed = f" ({len(entry['failed'])} failed)" if entry.get("failed") else ""
        cells = [_cell(entry["metrics"][key], entry["intervals"][key]) for key in keys]
        lines.append(f"| {name} | " + (f"{entry['pairs']}{failed} | " if pairs_column else "") + " | ".join(cells) + " |")
    return lines


def markdown(report: dict[str, Any]) -> str:
    primary = report["views"][PRIMARY.name]
    ks = primary["ks"]
    keys = measures.keys(ks, list(report["measures"]))
    k = measures.primary_k(ks)
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
    corpus = report.get("corpus")
    if corpus:
        lines.append(f"- corpus: {corpus['preset'] or 'custom'} ({corpus['repo_id']} "
                     f"{corpus['filename']}{', a local copy' if corpus['local_path'] else ''}): {corpus['note']}")
    lines.append(f"- protocol: {report['protocol']}")
    lines += builds_markdown(report, keys, k)
    lines += ["", "## Overall (95% intervals in brackets)", "", *_table(report["retrievers"], keys)]
    categories = sorted({c for e in report["retrievers"].values() for c in e["per_category"]})
    for key in [f"recall@{kk}" for kk in ks]:
        lines += ["", f"## {key} per category", "",
                  "| retriever | " + " | ".join(categories) + " |", "|---|" + "---:|" * len(categories)]
        for name, entry in report["retrievers"].items():
            cells = [_cell(entry["per_category"][c][key], entry["per_category"][c]["intervals"][key])
                     if c in entry["per_category"] else "–" for c in categories]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    splits = report["splits"]
    lines += ["", f"## Held-out split: tune on dev ({splits['dev']['pairs']} pairs), report test "
                  f"({splits['test']['pairs']} pairs)", "",
              f"Split seed {prov['split']['seed']}, dev fraction {prov['split']['dev_fraction']} "
              f"({prov['split']['rule']}). Test:", "",
              *_table({n: {**e, "pairs": splits["test"]["pairs"]} for n, e in splits["test"]["retrievers"].items()}, keys)]
    lines += ["", "## Paired comparisons", "",
              "Differences on the same pairs, with paired-bootstrap intervals; exact McNemar tests for "
              "recall_any/recall_all, paired randomization tests otherwise; Holm-corrected over every "
              "metric and category of a comparison.", ""]
    for label, result in report["comparisons"].items():
        lines.append(f"**{label}**")
        lines += [f"- {sentence}" for sentence in result["summary"]]
        lines.append("")
    lines += granularities_markdown(report, k)
    lines += whatif_markdown(report)
    lines += official_markdown(report)
    lines += diagnostics_markdown(report, ks, k)
    lines += projection.markdown(report["embed"])
    counts = report["dataset"]["per_category"]
    lines += ["", "Pairs per category: " + ", ".join(f"{c} {n}" for c, n in counts.items()), "",
              "Measures: " + "; ".join(f"{name}: {text}" for name, text in report["measures"].items()) + ". "
              "Failed pairs (vipune.on_error: record) are left out of every average.", ""]
    return "\n".join(lines)


def builds_markdown(report: dict[str, Any], keys: list[str], k: int) -> list[str]:
    builds = report["builds"]
    if not builds:
        return []
    lines = ["", "## vipune builds", "",
             "| build | version | sha256 | pairs | " + " | ".join(keys) + " | latency p50 / p95 (s) |",
             "|---|---|---|---:|" + "---:|" * len(keys) + "---:|"]
    for i, b in enumerate(builds):
        label = f"{b['id']} (primary)" if i == 0 else b["id"]
        if b.get("failed_checks"):
            label += " — fails preflight: " + ", ".join(b["failed_checks"])
        if report.get("baseline") and report["baseline"]["id"] == b["id"]:
            label += " (vipune baseline)"
        seconds = b.get("search_seconds")
        latency = f"{seconds['p50']:.3f} / {seconds['p95']:.3f}" if seconds else "–"
        cells = [_cell(b["metrics"][key], b["intervals"][key]) for key in keys]
        lines.append(f"| {label} | {b['version']} | {b['sha256'][:12]} | {b['pairs']} | " + " | ".join(cells)
                     + f" | {latency} |")
    for b in builds[1:]:
        lines += ["", f"**{b['id']} vs {builds[0]['id']}** ({b['comparison']['correction']})"]
        lines += [f"- {sentence}" for sentence in b["comparison"]["summary"]]
        lines += [f"- {len(b['changes'])} pairs gained or lost gold sessions in the top "
                  f"{max(int(kk.split('@')[1]) for kk in keys if '@' in kk)}"]
        for change in b["changes"][:20]:
            cells = ", ".join(f"recall@{kk} {v[0]:.2f} → {v[1]:.2f}" for kk, v in
                              ((key.split("@")[1], change[key]) for key in change if key.startswith("recall@")))
            lines.append(f"  - {change['question_id']} ({change['question_type']}): {cells}")
    return lines


def granularities_markdown(report: dict[str, Any], k: int) -> list[str]:
    grains = report["granularities"]
    if not grains:
        return []
    names = list(next(iter(grains.values()))["retrievers"])
    key = f"recall@{k}"
    lines = ["## Granularities (seed protocol, scored per session)", "",
             "| granularity | rows | unique texts | tokens embedded | " + " | ".join(names) + " |",
             "|---|---:|---:|---:|" + "---:|" * len(names)]
    for g, block in grains.items():
        cells = [_cell(block["retrievers"][n]["metrics"][key], block["retrievers"][n]["intervals"][key])
                 if n in block["retrievers"] else "–" for n in names]
        lines.append(f"| {g} | {block['rows']} | {block['unique_texts']} | {block['tokens_embedded']} | "
                     + " | ".join(cells) + " |")
    lines += ["", f"Cells: {key}. Rankings of turn and chunk rows collapse to sessions by first occurrence."]
    for g, block in grains.items():
        for name, result in block.get("vs_session", {}).items():
            lines += [f"- {name}, {g} vs session: {result['summary'][0]}"]
        short = {n: e["short_lists"] for n, e in block["retrievers"].items() if e["short_lists"]}
        if short:
            lines.append(f"- {g}: pairs whose ranking held fewer distinct sessions than the largest k: "
                         + ", ".join(f"{n} {c}" for n, c in short.items()))
    lines.append("")
    return lines


def whatif_markdown(report: dict[str, Any]) -> list[str]:
    block = report.get("whatif")
    if not block:
        return []
    sel, conf = block["select_on"], block["confirm_on"]
    base = block["base"]
    lines = [f"## What-if lab: variants of `{base['name']}`, {block['measure']} chosen on {sel}, "
             f"confirmed on {conf}", ""]
    lines += [f"- {sentence}" for sentence in whatif.verdict(block)]
    lines += ["", f"| variant | {sel} | {conf} | {conf} − base | 95% interval | p | p_holm | |",
              "|---|---:|---:|---:|---|---:|---:|---|",
              f"| base `{base['name']}` | {_opt(base[sel])} | {_opt(base[conf])} | | | | | |"]
    ordered = sorted(block["variants"], key=lambda r: -(r[sel] if r[sel] is not None else -1.0))
    for r in ordered:
        note = "chosen" if r["name"] == block["chosen"] else ""
        if r["params"] == base["params"]:
            note = (note + ", " if note else "") + "base setting"
        interval = "–" if r["interval"] is None else f"[{100 * r['interval'][0]:+.1f}, {100 * r['interval'][1]:+.1f}]"
        delta = "–" if r["test_delta"] is None else f"{100 * r['test_delta']:+.1f}"
        lines.append(f"| {r['name']} | {_opt(r[sel])} | {_opt(r[conf])} | {delta} | {interval} | "
                     f"{r['p']:.3f} | {r['p_holm']:.3f} | {note} |")
    lines += ["", f"Sorted by {sel}. Differences and intervals in points ({block['measure']} × 100) on the "
              f"{conf} pairs; p: paired randomisation (sign-flip) test against the base; p_holm: Holm over "
              f"the {block['tried']} variants. Runs: results/runs/<variant>.run.", ""]
    return lines


def corpus_text(corpus: dict[str, Any] | None) -> str:
    if not corpus:
        return "this run's dataset"
    return (f"ours: {corpus['preset'] or 'custom'} ({corpus['repo_id']} {corpus['filename']}"
            f"{', a local copy' if corpus['local_path'] else ''}; {corpus['note']})")


def beside_published(retrievers: dict[str, Any], corpus: dict[str, Any] | None) -> dict[str, Any]:
    """Each published row beside the configured retriever that reproduces it (its `metrics_all`,
    the set the paper's script averages, and its `metrics`), naming the corpus of each."""
    out = {}
    for paper, ours in PUBLISHED["ours"].items():
        if ours not in retrievers:
            continue
        entry = retrievers[ours]
        keys = PUBLISHED["retrievers"][paper]
        out[paper] = {"retriever": ours, "paper": keys, "paper_corpus": PUBLISHED["corpus"],
                      "ours_corpus": corpus_text(corpus),
                      "ours_all": {k: entry.get("metrics_all", entry["metrics"])[k] for k in keys},
                      "ours_all_pairs": entry.get("pairs_all", entry["pairs"]),
                      "ours": {k: entry["metrics"][k] for k in keys}, "ours_pairs": entry["pairs"]}
    return out


def official_markdown(report: dict[str, Any]) -> list[str]:
    lines = []
    for name, view in report["views"].items():
        if view["protocol"] != "official":
            continue
        shown = measures.keys(view["ks"], [m for m in view["measures"] if m != "mrr"])
        s = view["summary"]
        lines += [f"## View {name}: LongMemEval's own protocol", "", f"{view['description']}. "
                  f"Every one of the {s.get('pairs_all', view['pairs'])} non-abstention pairs is searched; "
                  f"`metrics` average the {view['pairs']} pairs run_retrieval.py averages "
                  f"({s['skipped_without_user_side_evidence']} left out by {s['skip_rule']}; "
                  f"{s['pairs_with_empty_gold']} kept with empty gold).", "",
                  *_table(view["retrievers"], shown), ""]
        every = {n: {**e, "metrics": e["metrics_all"], "intervals": e["intervals_all"], "pairs": e["pairs_all"]}
                 for n, e in view["retrievers"].items() if "metrics_all" in e}
        if every:
            lines += [f"`metrics_all`: every non-abstention pair, the set print_retrieval_metrics.py "
                      f"averages ({s.get('pairs_all')} pairs):", "", *_table(every, shown), ""]
        lines += [f"- {m}: {text}" for m, text in view["measures"].items()]
        lines.append("")
    if "official" in report:
        published = report["official"]["published"]
        cols = sorted({c for row in published["retrievers"].values() for c in row})
        corpus = report.get("corpus") or {}
        on = ("; on the paper's original corpus, not this run's cleaned one"
              if corpus.get("release") == "cleaned" else "")
        lines += ["Published figures on other retrievers (not ours; " + published["source"] + on + "):", "",
                  "| retriever | corpus | pairs | " + " | ".join(cols) + " |", "|---|---|---:|" + "---:|" * len(cols)]
        beside = report["official"].get("beside_published", {})
        for name, row in published["retrievers"].items():
            lines.append(f"| {name}, published | {published['corpus']} | – | "
                         + " | ".join(f"{row[c]:.3f}" if c in row else "–" for c in cols) + " |")
            b = beside.get(name)
            if b:
                lines.append(f"| `{b['retriever']}` (LongMemEval's BM25), `metrics_all` | {b['ours_corpus']} | "
                             f"{b['ours_all_pairs']} | " + " | ".join(f"{b['ours_all'][c]:.3f}" for c in cols) + " |")
                lines.append(f"| `{b['retriever']}`, `metrics` (run_retrieval.py's set) | {b['ours_corpus']} | "
                             f"{b['ours_pairs']} | " + " | ".join(f"{b['ours'][c]:.3f}" for c in cols) + " |")
        if not beside:
            lines.append("\nAdd the retriever `bm25-lme` (LongMemEval's own BM25) to put our number beside "
                         "the published BM25 row.")
        lines.append("")
    return lines


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
            (and_name, and_value), (or_name, or_value) = bm25[f"recall@{k}_on_empty_and_pairs"].items()
            lines.append(f"  - {and_name} and {or_name} differ in the top {k} of "
                         f"{bm25[f'hybrid_vs_hybrid_or_top{k}_differs']} pairs; on the empty-AND pairs "
                         f"recall@{k} is {_opt(and_value)} ({and_name}, AND) vs {_opt(or_value)} ({or_name}, OR).")
    for key, binary in (("vipune_vs_hybrid", "vipune"), ("vipune_semantic_vs_dense", "vipune-semantic")):
        agree = d.get(key)
        if agree:
            mirror = agree["mirror"]
            shares = ", ".join(f"top {kk}: {agree[f'same_top{kk}_share']:.1%}" for kk in ks)
            lines.append(f"- {binary} and its mirror `{mirror}` return the same ranking on {shares} of "
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


def run_report(manifest: Path, out_json: Path, out_md: Path) -> dict[str, Any]:
    report = build_report(read_json(manifest))
    write_json(out_json, report)
    with atomic_path(out_md) as tmp:
        tmp.write_text(markdown(report), encoding="utf-8")
    return report

