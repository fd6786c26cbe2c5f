"""report.md: the report rendered for people (report.json in, Markdown out; nothing is read or
computed here that build.py did not put in the report)."""

from __future__ import annotations

from typing import Any, Mapping

from vipune_eval.core.intervals import MIN_BOOTSTRAP_PAIRS
from vipune_eval.registry import measures
from vipune_eval.registry.views import PRIMARY
from vipune_eval.stages.report import whatif


NO_INTERVAL = "no CI"
NO_INTERVAL_NOTE = (f"`{NO_INTERVAL}`: fewer than {MIN_BOOTSTRAP_PAIRS} pairs, too few for a bootstrap interval "
                    "(resampling so few values gives none worth the name; recall_any and recall_all keep "
                    "their Wilson intervals).")


def _cell(value: float, interval: list[float] | None) -> str:
    """A value with its 95% interval; None: the score stage gave none (too few pairs)."""
    if interval is None:
        return f"{value:.3f} [{NO_INTERVAL}]"
    return f"{value:.3f} [{interval[0]:.2f}, {interval[1]:.2f}]"


def _without_interval(rows: list[str]) -> list[str]:
    """The note that explains ``no CI``, after a table that shows it."""
    return ["", NO_INTERVAL_NOTE] if any(f"[{NO_INTERVAL}]" in row for row in rows) else []


def _table(rows: dict[str, dict[str, Any]], keys: list[str], pairs_column: bool = True) -> list[str]:
    head = "| retriever | " + ("pairs | " if pairs_column else "") + " | ".join(keys) + " |"
    lines = [head, "|---|" + ("---:|" if pairs_column else "") + "---:|" * len(keys)]
    for name, entry in rows.items():
        failed = f" ({len(entry['failed'])} failed)" if entry.get("failed") else ""
        cells = [_cell(entry["metrics"][key], entry["intervals"][key]) for key in keys]
        lines.append(f"| {name} | " + (f"{entry['pairs']}{failed} | " if pairs_column else "") + " | ".join(cells) + " |")
    return lines + _without_interval(lines)


def render(report: Mapping[str, Any]) -> str:
    # tables in the report's order (vipune's lane first), not report.json's sorted keys
    report = {**report, "retrievers": {n: report["retrievers"][n] for n in report["retriever_order"]}}
    primary = report["views"][PRIMARY.name]
    ks = primary["ks"]
    keys = measures.keys(ks, list(report["measures"]))
    k = measures.primary_k(ks)
    prov = report["provenance"]
    lines = ["# vipune-eval report", ""]
    vipune = prov.get("vipune")
    if vipune:
        lines.append(f"- vipune {vipune['version']} (binary sha256 {vipune['sha256']}; the contract "
                     f"was checked against {prov['contract_release']})")
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
        sha = f", sha256 {corpus['sha256'][:12]}…" if corpus.get("sha256") else ""
        lines.append(f"- corpus: {corpus['preset'] or corpus['release']} ({corpus['source']}{sha}): {corpus['note']}")
    lines.append(f"- protocol: {report['protocol']}")
    lines += builds_markdown(report, keys, k)
    lines += ["", "## Overall (95% intervals in brackets)", "", *_table(report["retrievers"], keys)]
    for key in [measures.key(measures.PRIMARY, kk) for kk in ks]:
        lines += ["", f"## {key} per category", "", *per_category_table(report["retrievers"], key)]
    splits = report["splits"]
    lines += ["", f"## Held-out split: tune on dev ({splits['dev']['pairs']} pairs), report test "
                  f"({splits['test']['pairs']} pairs)", "",
              f"Split seed {prov['split']['seed']}, dev fraction {prov['split']['dev_fraction']} "
              f"({prov['split']['rule']}). Test:", "",
              *_table({n: {**splits["test"]["retrievers"][n], "pairs": splits["test"]["pairs"]}
                       for n in report["retriever_order"] if n in splits["test"]["retrievers"]}, keys)]
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
    lines += embed_markdown(report["embed"])
    counts = report["dataset"]["per_category"]
    lines += ["", "Pairs per category: " + ", ".join(f"{c} {n}" for c, n in counts.items()), "",
              "Measures: " + "; ".join(f"{name}: {text}" for name, text in report["measures"].items()) + ". "
              "Failed pairs (vipune.on_error: record) are left out of every average.", ""]
    return "\n".join(lines)


def per_category_table(retrievers: Mapping[str, Any], key: str) -> list[str]:
    """``key`` per category, each category's pair count in its heading (and in a cell whose
    retriever scored fewer pairs there: failed pairs are left out)."""
    categories = sorted({c for e in retrievers.values() for c in e["per_category"]})
    pairs = {c: max(e["per_category"][c]["pairs"] for e in retrievers.values() if c in e["per_category"])
             for c in categories}
    lines = ["| retriever | " + " | ".join(f"{c} ({pairs[c]} pairs)" for c in categories) + " |",
             "|---|" + "---:|" * len(categories)]
    for name, entry in retrievers.items():
        cells = []
        for c in categories:
            group = entry["per_category"].get(c)
            if group is None:
                cells.append("–")
                continue
            fewer = f" ({group['pairs']} pairs)" if group["pairs"] != pairs[c] else ""
            cells.append(_cell(group[key], group["intervals"][key]) + fewer)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines + _without_interval(lines)


def builds_markdown(report: dict[str, Any], keys: list[str], k: int) -> list[str]:
    builds = report["builds"]
    if not builds:
        return []
    lines = ["", "## vipune builds", "",
             "| build | version | sha256 | from | pairs | " + " | ".join(keys) + " | latency p50 / p95 (s) |",
             "|---|---|---|---|---:|" + "---:|" * len(keys) + "---:|"]
    for i, b in enumerate(builds):
        label = f"{b['id']} (primary)" if i == 0 else b["id"]
        if b.get("failed_checks"):
            label += " — fails preflight: " + "; ".join(b.get("drift") or b["failed_checks"])
        if report.get("baseline") and report["baseline"]["id"] == b["id"]:
            label += " (vipune baseline)"
        seconds = b.get("search_seconds")
        latency = f"{seconds['p50']:.3f} / {seconds['p95']:.3f}" if seconds else "–"
        cells = [_cell(b["metrics"][key], b["intervals"][key]) for key in keys]
        lines.append(f"| {label} | {b['version']} | {b['sha256'][:12]} | {b.get('source') or '–'} | {b['pairs']} | "
                     + " | ".join(cells) + f" | {latency} |")
    lines += _without_interval(lines)
    for b in builds[1:]:
        lines += ["", f"**{b['id']} vs {builds[0]['id']}** ({b['comparison']['correction']})"]
        lines += [f"- {sentence}" for sentence in b["comparison"]["summary"]]
        lines += [f"- {len(b['changes'])} pairs gained or lost gold sessions in the top "
                  f"{max(measures.cutoff(kk) or 0 for kk in keys)}"]
        for change in b["changes"][:20]:
            # a change holds gained@k / lost@k and the primary measure's key at each k that changed
            cells = ", ".join(f"{key} {change[key][0]:.2f} → {change[key][1]:.2f}" for key in keys if key in change)
            lines.append(f"  - {change['question_id']} ({change['question_type']}): {cells}")
    return lines


def granularities_markdown(report: dict[str, Any], k: int) -> list[str]:
    grains = report["granularities"]
    if not grains:
        return []
    names = list(next(iter(grains.values()))["retrievers"])
    key = measures.key(measures.PRIMARY, k)
    lines = ["## Granularities (seed protocol, scored per session)", "",
             "| granularity | rows | unique texts | tokens embedded | " + " | ".join(names) + " |",
             "|---|---:|---:|---:|" + "---:|" * len(names)]
    for g, block in grains.items():
        cells = [_cell(block["retrievers"][n]["metrics"][key], block["retrievers"][n]["intervals"][key])
                 if n in block["retrievers"] else "–" for n in names]
        lines.append(f"| {g} | {block['rows']} | {block['unique_texts']} | {block['tokens_embedded']} | "
                     + " | ".join(cells) + " |")
    lines += _without_interval(lines)
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


def official_markdown(report: dict[str, Any]) -> list[str]:
    lines = []
    for name, view in report["views"].items():
        if view["protocol"] != "official":
            continue
        shown = measures.keys(view["ks"], [m for m in view["measures"] if measures.BY_NAME[m].at_k])
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
                      f"averages ({s.get('pairs_all')} pairs):", "", *_table(every, shown), "",
                      "recall_all and recall_any follow LongMemEval's code, where a pair with no gold "
                      "session (its gold keeps only sessions with a user-side `has_answer` turn) scores "
                      "recall_all = 1 (none of its no gold sessions is missing) and recall_any = ndcg_any "
                      f"= 0. `metrics_all` holds the {s['skipped_without_user_side_evidence']} pairs without "
                      "user-side evidence, every one with no gold, so there recall_all can exceed "
                      "recall_any; `metrics` leaves them out, as run_retrieval.py does "
                      f"({s['pairs_with_empty_gold']} pairs with empty gold remain in it).", ""]
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
        if not beside and not corpus.get("same_as_paper"):
            lines.append(f"\nNot set beside our numbers: this run scored {corpus.get('preset') or 'a file'} "
                         f"({corpus.get('note', 'an unidentified dataset')}), not the paper's corpus.")
        elif not beside:
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
    recall = measures.key(measures.PRIMARY, k)
    for name, split in t[recall].items():
        if split["truncated_gold"] is not None:
            lines.append(f"  - {name}: {recall} {_opt(split['truncated_gold'])} with truncated gold, "
                         f"{_opt(split['untruncated_gold'])} without")
    bm25 = d["bm25_and_query"]
    if bm25:
        lines.append(f"- vipune's AND query finds nothing for {bm25['bm25_empty_share']:.1%} of the questions "
                     f"({bm25['bm25_empty_pairs']} pairs); there hybrid search is the semantic order.")
        if f"hybrid_vs_hybrid_or_top{k}_differs" in bm25:
            (and_name, and_value), (or_name, or_value) = bm25[f"{recall}_on_empty_and_pairs"].items()
            lines.append(f"  - {and_name} and {or_name} differ in the top {k} of "
                         f"{bm25[f'hybrid_vs_hybrid_or_top{k}_differs']} pairs; on the empty-AND pairs "
                         f"{recall} is {_opt(and_value)} ({and_name}, AND) vs {_opt(or_value)} ({or_name}, OR).")
    for key, binary in (("vipune_vs_hybrid", "vipune"), ("vipune_semantic_vs_dense", "vipune-semantic")):
        agree = d.get(key)
        if agree:
            mirror = agree["mirror"]
            shares = ", ".join(f"top {kk}: {agree[f'same_top{kk}_share']:.1%}" for kk in ks)
            lines.append(f"- {binary} and its mirror `{mirror}` return the same ranking on {shares} of "
                         f"{agree['pairs']} pairs. A large disagreement means the binary no longer does "
                         f"what its contract says.")
    for agree in d.get("lanes", []):
        shares = ", ".join(f"top {kk}: {agree[f'same_top{kk}_share']:.1%}" for kk in ks)
        differ = agree[f"differ_top{max(ks)}"]
        lines.append(f"- {agree['run']} (vipune's own search code through vipune-lane, on the cached query "
                     f"vectors) and {agree['mirror']} (the binary, with its model) return the same ranking on "
                     f"{shares} of {agree['pairs']} pairs"
                     + (f"; they differ on {len(differ)}: {', '.join(differ)}." if differ else "."))
    seconds = report["retrievers"].get("vipune", {}).get("search_seconds")
    if seconds:
        lines.append(f"- vipune search latency (per query, subprocess included): p50 {seconds['p50']:.3f} s, "
                     f"p95 {seconds['p95']:.3f} s, max {seconds['max']:.3f} s over {seconds['calls']} calls")
    ranks = d["gold_ranks"]
    misses = [r for r in ranks["pairs"] if r[recall] < 1][:20]
    lines += ["", f"### Worst pairs for {ranks['retriever']} (gold session ranks; – = not retrieved)", "",
              f"| question | category | {recall} | gold ranks |", "|---|---|---:|---|"]
    for r in misses:
        ranked = ", ".join(f"{g}: {rank or '–'}" for g, rank in r["gold_ranks"].items())
        lines.append(f"| {r['question_id']} | {r['question_type']} | {r[recall]:.2f} | {ranked} |")
    return lines


def embed_markdown(embed: dict[str, Any]) -> list[str]:
    """The report's "Embed throughput" section."""
    lines = ["", "## Embed throughput", "", f"{embed['definition']}.", ""]
    if not embed["providers"]:
        return lines + [f"- {embed['why']}; the embed jobs' own time, summed: {embed['job_seconds']:.1f} s."]
    lines.append(f"- {embed['texts']} texts ({embed['tokens']} tokens) in {embed['seconds']:.1f} s of model calls by "
                 f"{embed['jobs']} job(s); the embed jobs' own time, summed: {embed['job_seconds']:.1f} s, of it "
                 f"{embed['load_seconds']:.1f} s loading the model; the rest is counting tokens, reading texts and "
                 "waiting on texts other jobs had claimed")
    for p in embed["providers"]:
        rate = f", {p['useful_gflops_per_s']:.0f} useful GFLOP/s" if "useful_gflops_per_s" in p else ""
        speed = f"{p['texts_per_s']:.1f} texts/s{rate}" if "texts_per_s" in p else "no rate"
        budgets = "/".join(map(str, p["batch_tokens"])) or "not recorded"
        lines.append(f"- **{p['provider'].upper()}** ({p['device']}): {p['texts']} texts by {p['jobs']} job(s) of "
                     f"{'/'.join(map(str, p['threads']))} thread(s), batches of at most {budgets} tokens: {speed}")
        lines.append(f"  - vectors: {p['reproducibility']}")
        if p["projection"] is None:
            lines.append(f"  - no projection: {p['why']}")
        else:
            minutes = ", ".join(f"{g} rows {m:.{1 if m < 10 else 0}f} min" for g, m in p["projection"]["minutes"].items())
            lines.append(f"  - projected: {p['projection']['what']}: {minutes}")
            session = p["projection"]["workload"].get("session")
            theirs = (f"; LongMemEval_M's session texts average {session['tokens'] / session['texts']:.0f}"
                      if session else "")
            lines.append(f"  - what this projection rests on: this run's texts (mean {p['tokens'] / p['texts']:.0f} "
                         f"tokens{theirs}; on short texts each model call's overhead weighs more, so the rate "
                         "is lower) and this machine's load while the embed jobs ran. The README's figure "
                         "(docs/performance.md) was measured on a calm 2-core machine on texts of LongMemEval_M's "
                         "lengths: plan a LongMemEval_M run with that one; this one holds only for texts of "
                         "M's lengths on a machine as loaded as this one was.")
    return lines



def _opt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"
