"""The report's sections, built once from report.json (stages.report.build) into a document
(stages.report.document) that report.md, the HTML pages and the closing summary render. Every
sentence and table a person reads is made here; nothing is read or computed that build.py did not
put in the report.

A new table or section is one function here, listed in ``document``'s ``sections``, plus its test
(tests/unit/stages/report/test_build.py); the renderers need no change.
"""

from __future__ import annotations

from typing import Any, Mapping

from vipune_eval.core import paths
from vipune_eval.registry import granularities, measures
from vipune_eval.registry.views import PRIMARY
from vipune_eval.stages.report import lanes, whatif
from vipune_eval.stages.report.document import (
    NO_INTERVAL_NOTE, Block, Bullets, Document, Item, Paragraph, Section, Table, cell,
)
from vipune_eval.vipune.contract import EXIT_TOO_LONG

# Where a run's files are: (path, what it holds), in the order a person opens them.
FILES = ((paths.REPORT_MD, "every table: per category, dev/test, comparisons, diagnostics"),
         (paths.REPORT_HTML, "the HTML report: these numbers first, then every table with its plot"),
         (paths.REPORT_JSON, "every number, interval and the provenance, for scripts"))
MISMATCH_SHOWN = 0.05  # a vipune run and its mirror differing on more pairs than this is a warning
PAIRS_NAMED = 10       # a warning names at most this many failed pairs
# What a vipune exit code means when a search ends with it (docs/vipune-contract.md)
REFUSALS = {EXIT_TOO_LONG: "vipune refuses a question over 512 tokens"}


def _marked(names: list[str]) -> frozenset[int]:
    return frozenset(i for i, name in enumerate(names) if name in lanes.NAMES)


def _noted(table: Table) -> list[Block]:
    """A table and, when a cell shows ``no CI``, the note that explains it."""
    return [table, Paragraph(NO_INTERVAL_NOTE)] if table.shows_no_interval() else [table]


def retriever_table(rows: Mapping[str, Mapping[str, Any]], keys: list[str]) -> Table:
    """One row per retriever: its pairs (and how many failed) and each measure with its interval."""
    out = []
    for name, entry in rows.items():
        failed = f" ({len(entry['failed'])} failed)" if entry.get("failed") else ""
        out.append([name, f"{entry['pairs']}{failed}",
                    *(cell(entry["metrics"][key], entry["intervals"][key]) for key in keys)])
    return Table(["retriever", "pairs", *keys], out, marked=_marked(list(rows)))


def ordered(report: Mapping[str, Any]) -> dict[str, Any]:
    """The primary view's retrievers in the report's order (vipune's lanes first)."""
    return by_retriever(report, report["retrievers"])


def _primary_ks(report: Mapping[str, Any]) -> list[int]:
    return report["views"][PRIMARY.name]["ks"]


# report.json's keys are sorted (and report.md, the HTML page and the summary render it after its
# round trip through JSON): every order a reader sees is set here, never taken from a mapping.
def by_measure(names: Any) -> list[str]:
    """Measure names in the registry's order."""
    return [m.name for m in measures.MEASURES if m.name in names]


def by_granularity(names: Any) -> list[str]:
    return [g for g in granularities.NAMES if g in names] + [g for g in names if g not in granularities.NAMES]


def by_retriever(report: Mapping[str, Any], rows: Mapping[str, Any]) -> dict[str, Any]:
    """``rows`` (retriever → anything) in the report's order of retrievers, vipune's lanes first."""
    order = [n for n in report["retriever_order"] if n in rows]
    return {n: rows[n] for n in order + sorted(set(rows) - set(order))}


# ---------------------------------------------------------------- what was scored


def failed_preflight(build: Mapping[str, Any]) -> str:
    """What a build's failed preflight is, in words: the drift each failed check is, where the
    preflight knows it, else the check's name (one owner: the builds table and the warnings)."""
    return "fails preflight: " + "; ".join(build.get("drift") or build["failed_checks"])


def vipune_line(report: Mapping[str, Any], short: bool = False) -> str | None:
    """The primary vipune build: its version, binary sha256 and the release the contract was
    checked against, then its build id and where it came from (``short``: the version, id and
    source only, for a terminal)."""
    prov = report["provenance"]
    vipune = prov.get("vipune")
    if not vipune:
        return None
    build = next((b for b in report["builds"] if b["id"] == vipune.get("id")), {})
    source = f", from {build['source']}" if build.get("source") else ""
    if short:
        return f"vipune {vipune['version']}, build {vipune['id']}{source}"
    return (f"vipune {vipune['version']} (binary sha256 {vipune['sha256']}; the contract was checked "
            f"against {prov['contract_release']}): build {vipune['id']}{source}")


def lane_line(report: Mapping[str, Any]) -> str | None:
    """The vipune-lane of the lib lane: the vipune source it was built from (a release, or a
    checkout with its git description), the binary it belongs to, and its own sources."""
    lane = report["provenance"].get("lane")
    if not lane:
        return None
    built = lane.get("built") or {}
    source = built.get("vipune_source") or f"vipune {lane['version']}"
    sources = f", lane/ sources {built['lane_source'][:12]}" if built.get("lane_source") else ""
    return (f"vipune-lane {lane['id']} (sha256 {lane['sha256'][:12]}): vipune's search code from {source}, "
            f"beside build {lane['binary']}{sources}")


def model_line(model: Mapping[str, Any]) -> str:
    """The model: which files, where they came from, and whether they are the pinned bytes of the
    model they are laid out as (provenance.model, stages.report.build.model_provenance)."""
    name = f"{model['repo_id']}@{model['revision'][:12]}"
    files = f"{name} `{model['file']}` (sha256 {model['files'][model['file']][:12]})"
    where = f"files from {model['path']} laid out as {files}" if model["path"] else f"{files}, downloaded"
    line = f"model: {where}, {model['pooling']} pooling + L2"
    if model["pinned"] is None:
        return line + f": {name} has no pins, so these bytes are recorded, not checked"
    if model["pinned"]:
        return line + f": the pinned bytes of {name}"
    pins = model["pins"]
    differ = "; ".join(f"`{file}` sha256 {pins[file]['pinned'][:12]}" for file in sorted(pins)
                       if pins[file]["found"] != pins[file]["pinned"])
    return (line + f": not the pinned bytes of {name} (pinned: {differ}): numbers are not comparable with "
            "runs on the pinned model")


def dataset_line(report: Mapping[str, Any]) -> str:
    data = report["provenance"]["dataset"]
    return (f"dataset {data.get('repo_id') or 'local file'} {data.get('filename') or ''} "
            f"(sha256 {data['sha256'][:12]}): {report['pairs']} pairs")


def corpus_line(report: Mapping[str, Any]) -> str | None:
    corpus = report.get("corpus")
    if not corpus:
        return None
    sha = f", sha256 {corpus['sha256'][:12]}…" if corpus.get("sha256") else ""
    return f"corpus: {corpus['preset'] or corpus['release']} ({corpus['source']}{sha}): {corpus['note']}"


# ---------------------------------------------------------------- the headline and the warnings


def headline(report: Mapping[str, Any]) -> Table:
    """Each retriever (vipune's lanes first) with its pairs and recall@k, k of the primary view,
    with intervals."""
    keys = [measures.key(measures.PRIMARY, k) for k in _primary_ks(report)]
    return retriever_table(ordered(report), keys)


def build_lines(report: Mapping[str, Any]) -> list[str]:
    """One line per vipune build but the primary: its difference from the primary on recall@k
    (the primary k) with its interval and Holm-adjusted p, and how many pairs changed."""
    builds = report["builds"]
    if len(builds) < 2:
        return []
    key = measures.key(measures.PRIMARY, measures.primary_k(_primary_ks(report)))
    lines = []
    for b in builds[1:]:
        r = b["comparison"]["overall"][key]
        lo, hi = r["interval"]
        verdict = "a real difference" if r["significant"] else "no significant difference"
        lines.append(f"{b['id']} ({b.get('source') or 'evaluated before'}): {key} {r['a']:.3f} vs "
                     f"{r['b']:.3f} ({100 * r['difference']:+.1f} points, 95% CI {100 * lo:+.1f} to "
                     f"{100 * hi:+.1f}, p_holm = {r['p_holm']:.3f}: {verdict}); "
                     f"{len(b['changes'])} pairs gained or lost gold sessions")
    return lines


def failure_reason(message: str) -> str:
    """Why a pair failed, in a few words: what vipune's exit code means where the contract names
    it, else the exit code (the message is vipune.client's: ``… `COMMAND` exited N: …``)."""
    rest = message.partition("` exited ")[2]
    code = rest.split(":", 1)[0].split(" ", 1)[0]
    if not code.lstrip("-").isdigit():
        return "the pairs"
    refusal = REFUSALS.get(int(code))
    return f"{refusal} (exit {code})" if refusal else f"vipune exited {code}"


def failed_pairs(report: Mapping[str, Any]) -> list[str]:
    """The pairs a lane failed (vipune.on_error: record), named, with why: one line per reason
    and set of retrievers (vipune's two lanes fail the same personas)."""
    failed: dict[tuple[str, str], list[str]] = {}  # (pair, why) → the retrievers that failed it
    for name in report["retriever_order"]:
        messages = report["retrievers"][name].get("failed") or {}
        for qid in sorted(messages):
            failed.setdefault((qid, failure_reason(messages[qid])), []).append(name)
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}  # (why, retrievers) → pairs
    for (qid, reason), names in failed.items():
        groups.setdefault((reason, tuple(names)), []).append(qid)
    out = []
    for (reason, names), qids in groups.items():
        more = len(qids) - PAIRS_NAMED
        shown = ", ".join(qids[:PAIRS_NAMED]) + (f" and {more} more" if more > 0 else "")
        many = len(qids) != 1
        out.append(f"{' and '.join(names)}: {len(qids)} pair{'s' if many else ''} failed and {'are' if many else 'is'} "
                   f"left out of every average (vipune.on_error: record; report.json lists why); {reason}: {shown}")
    return out


def warnings(report: Mapping[str, Any], table: Table) -> list[str]:
    """What changes the reading of the numbers: failed pairs (named, with why), builds that fail
    their preflight, truncated gold sessions, a vipune lane that no longer agrees with its mirror,
    too few pairs."""
    out = failed_pairs(report)
    for b in report["builds"]:
        if b.get("failed_checks"):
            out.append(f"{b['id']} {failed_preflight(b)}; its search does not do what the contract says "
                       "(vipune.preflight: record evaluated it anyway)")
    d = report["diagnostics"]
    t = d["truncation"]
    if t["pairs_with_truncated_gold"]:
        out.append(f"{t['truncated_share']:.1%} of the session texts are over 512 tokens and were embedded "
                   f"truncated; {t['pairs_with_truncated_gold']} pairs have a truncated gold session "
                   "(report.md, Diagnostics)")
    k = measures.primary_k(_primary_ks(report))
    for lane in lanes.LANES:
        agree = d.get(lane.agreement) if lane.agreement else None
        if agree and 1 - agree[f"same_top{k}_share"] > MISMATCH_SHOWN:
            out.append(f"{lane.retriever} and its mirror {agree['mirror']} rank the top {k} differently on "
                       f"{1 - agree[f'same_top{k}_share']:.0%} of {agree['pairs']} pairs: the binary no longer "
                       "does what its contract says, or the mirror's setting differs")
    for agree in d.get("lanes", []):
        differ = agree[f"differ_top{max(_primary_ks(report))}"]
        if differ:
            out.append(f"{agree['run']} (vipune's code, cached vectors) and {agree['mirror']} (the binary) rank "
                       f"{len(differ)} of {agree['pairs']} pairs differently: {', '.join(differ[:5])}"
                       + (" …" if len(differ) > 5 else "") + " (report.md, Diagnostics)")
    if table.shows_no_interval():
        out.append(NO_INTERVAL_NOTE)
    return out


# ---------------------------------------------------------------- report.md's sections


def builds_section(report: Mapping[str, Any], keys: list[str]) -> list[Section]:
    builds = report["builds"]
    if not builds:
        return []
    rows = []
    for i, b in enumerate(builds):
        label = f"{b['id']} (primary)" if i == 0 else b["id"]
        if b.get("failed_checks"):
            label += " — " + failed_preflight(b)
        if report.get("baseline") and report["baseline"]["id"] == b["id"]:
            label += " (vipune baseline)"
        seconds = b.get("search_seconds")
        latency = f"{seconds['p50']:.3f} / {seconds['p95']:.3f}" if seconds else "–"
        rows.append([label, b["version"], b["sha256"][:12], b.get("source") or "–", str(b["pairs"]),
                     *(cell(b["metrics"][key], b["intervals"][key]) for key in keys), latency])
    columns = ["build", "version", "sha256", "from", "pairs", *keys, "latency p50 / p95 (s)"]
    blocks = _noted(Table(columns, rows, numeric=[False] * 4 + [True] * (len(keys) + 2)))
    top = max(measures.cutoff(kk) or 0 for kk in keys)
    for b in builds[1:]:
        changes = [f"{c['question_id']} ({c['question_type']}): "
                   # a change holds gained@k / lost@k and the primary measure's key at each k that changed
                   + ", ".join(f"{key} {c[key][0]:.2f} → {c[key][1]:.2f}" for key in keys if key in c)
                   for c in b["changes"][:20]]
        blocks.append(Bullets([*map(Item, b["comparison"]["summary"]),
                               Item(f"{len(b['changes'])} pairs gained or lost gold sessions in the top {top}",
                                    changes)],
                              lead=f"**{b['id']} vs {builds[0]['id']}** ({b['comparison']['correction']})"))
    return [Section("builds", "vipune builds", blocks)]


def overall_section(report: Mapping[str, Any], keys: list[str]) -> list[Section]:
    return [Section("overall", "Overall (95% intervals in brackets)", _noted(retriever_table(ordered(report), keys)))]


def per_category_table(retrievers: Mapping[str, Any], key: str) -> list[Block]:
    """``key`` per category, each category's pair count in its heading (and in a cell whose
    retriever scored fewer pairs there: failed pairs are left out)."""
    categories = sorted({c for e in retrievers.values() for c in e["per_category"]})
    pairs = {c: max(e["per_category"][c]["pairs"] for e in retrievers.values() if c in e["per_category"])
             for c in categories}
    rows = []
    for name, entry in retrievers.items():
        cells = []
        for c in categories:
            group = entry["per_category"].get(c)
            if group is None:
                cells.append("–")
                continue
            fewer = f" ({group['pairs']} pairs)" if group["pairs"] != pairs[c] else ""
            cells.append(cell(group[key], group["intervals"][key]) + fewer)
        rows.append([name, *cells])
    return _noted(Table(["retriever", *(f"{c} ({pairs[c]} pairs)" for c in categories)], rows,
                        marked=_marked(list(retrievers))))


def per_category_sections(report: Mapping[str, Any], ks: list[int]) -> list[Section]:
    """One section per k; the primary k's is keyed ``per-category`` (its plot stands beside it)."""
    primary = measures.primary_k(ks)
    return [Section("per-category" if k == primary else f"per-category@{k}", f"{key} per category",
                    per_category_table(ordered(report), key))
            for k in ks for key in [measures.key(measures.PRIMARY, k)]]


def split_section(report: Mapping[str, Any], keys: list[str]) -> list[Section]:
    splits, split = report["splits"], report["provenance"]["split"]
    test = {n: {**splits["test"]["retrievers"][n], "pairs": splits["test"]["pairs"]}
            for n in report["retriever_order"] if n in splits["test"]["retrievers"]}
    return [Section("split", f"Held-out split: tune on dev ({splits['dev']['pairs']} pairs), report test "
                             f"({splits['test']['pairs']} pairs)",
                    [Paragraph(f"Split seed {split['seed']}, dev fraction {split['dev_fraction']} "
                               f"({split['rule']}). Test:"), *_noted(retriever_table(test, keys))])]


def _comparisons(report: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The paired comparisons ("A vs B") in the report's order of B."""
    compared = report["comparisons"]
    rank = {name: i for i, name in enumerate(report["retriever_order"])}
    return sorted(compared.items(), key=lambda item: (rank.get(item[0].split(" vs ", 1)[-1], len(rank)), item[0]))


def comparisons_section(report: Mapping[str, Any]) -> list[Section]:
    blocks: list[Block] = [Paragraph(
        "Differences on the same pairs, with paired-bootstrap intervals; exact McNemar tests for "
        "recall_any/recall_all, paired randomization tests otherwise; Holm-corrected over every "
        "metric and category of a comparison.")]
    blocks += [Bullets(list(map(Item, result["summary"])), lead=f"**{label}**")
               for label, result in _comparisons(report)]
    return [Section("comparisons", "Paired comparisons", blocks)]


def granularities_section(report: Mapping[str, Any], k: int) -> list[Section]:
    if not report["granularities"]:
        return []
    grains = {g: report["granularities"][g] for g in by_granularity(report["granularities"])}
    names = list(by_retriever(report, next(iter(grains.values()))["retrievers"]))
    key = measures.key(measures.PRIMARY, k)
    rows = [[g, str(block["rows"]), str(block["unique_texts"]), str(block["tokens_embedded"]),
             *(cell(block["retrievers"][n]["metrics"][key], block["retrievers"][n]["intervals"][key])
               if n in block["retrievers"] else "–" for n in names)]
            for g, block in grains.items()]
    items = []
    for g, block in grains.items():
        items += [Item(f"{name}, {g} vs session: {result['summary'][0]}")
                  for name, result in by_retriever(report, block.get("vs_session", {})).items()]
        short = {n: e["short_lists"] for n, e in by_retriever(report, block["retrievers"]).items() if e["short_lists"]}
        if short:
            items.append(Item(f"{g}: pairs whose ranking held fewer distinct sessions than the largest k: "
                              + ", ".join(f"{n} {c}" for n, c in short.items())))
    lead = f"Cells: {key}. Rankings of turn and chunk rows collapse to sessions by first occurrence."
    return [Section("granularities", "Granularities (seed protocol, scored per session)",
                    [*_noted(Table(["granularity", "rows", "unique texts", "tokens embedded", *names], rows)),
                     Bullets(items, lead=lead)])]


def _opt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def whatif_section(report: Mapping[str, Any]) -> list[Section]:
    block = report.get("whatif")
    if not block:
        return []
    sel, conf = block["select_on"], block["confirm_on"]
    base = block["base"]
    rows = [[f"base `{base['name']}`", _opt(base[sel]), _opt(base[conf]), "", "", "", "", ""]]
    for r in sorted(block["variants"], key=lambda r: -(r[sel] if r[sel] is not None else -1.0)):
        note = "chosen" if r["name"] == block["chosen"] else ""
        if r["params"] == base["params"]:
            note = (note + ", " if note else "") + "base setting"
        interval = "–" if r["interval"] is None else f"[{100 * r['interval'][0]:+.1f}, {100 * r['interval'][1]:+.1f}]"
        delta = "–" if r["test_delta"] is None else f"{100 * r['test_delta']:+.1f}"
        rows.append([r["name"], _opt(r[sel]), _opt(r[conf]), delta, interval, f"{r['p']:.3f}",
                     f"{r['p_holm']:.3f}", note])
    table = Table(["variant", sel, conf, f"{conf} − base", "95% interval", "p", "p_holm", ""], rows,
                  numeric=[False, True, True, True, False, True, True, False])
    return [Section("whatif", f"What-if lab: variants of `{base['name']}`, {block['measure']} chosen on {sel}, "
                              f"confirmed on {conf}",
                    [Bullets(list(map(Item, whatif.verdict(block)))), table,
                     Paragraph(f"Sorted by {sel}. Differences and intervals in points ({block['measure']} × 100) "
                               f"on the {conf} pairs; p: paired randomisation (sign-flip) test against the base; "
                               f"p_holm: Holm over the {block['tried']} variants. Runs: results/runs/<variant>.run.")])]


def published_blocks(report: Mapping[str, Any]) -> list[Block]:
    """LongMemEval's published figures, our `bm25-lme` beside them where the corpus is the paper's."""
    published = report["official"]["published"]
    cols = sorted({c for row in published["retrievers"].values() for c in row})
    corpus = report.get("corpus") or {}
    on = "; on the paper's original corpus, not this run's cleaned one" if corpus.get("release") == "cleaned" else ""
    beside = report["official"].get("beside_published", {})
    rows = []
    for name, row in published["retrievers"].items():
        rows.append([f"{name}, published", published["corpus"], "–",
                     *(f"{row[c]:.3f}" if c in row else "–" for c in cols)])
        b = beside.get(name)
        if b:
            rows.append([f"`{b['retriever']}` (LongMemEval's BM25), `metrics_all`", b["ours_corpus"],
                         str(b["ours_all_pairs"]), *(f"{b['ours_all'][c]:.3f}" for c in cols)])
            rows.append([f"`{b['retriever']}`, `metrics` (run_retrieval.py's set)", b["ours_corpus"],
                         str(b["ours_pairs"]), *(f"{b['ours'][c]:.3f}" for c in cols)])
    blocks: list[Block] = [
        Paragraph("Published figures on other retrievers (not ours; " + published["source"] + on + "):"),
        Table(["retriever", "corpus", "pairs", *cols], rows, numeric=[False, False, *[True] * (len(cols) + 1)])]
    if not beside and not corpus.get("same_as_paper"):
        blocks.append(Paragraph(f"Not set beside our numbers: this run scored {corpus.get('preset') or 'a file'} "
                                f"({corpus.get('note', 'an unidentified dataset')}), not the paper's corpus."))
    elif not beside:
        blocks.append(Paragraph("Add the retriever `bm25-lme` (LongMemEval's own BM25) to put our number beside "
                                "the published BM25 row."))
    return blocks


def official_sections(report: Mapping[str, Any]) -> list[Section]:
    out = []
    views = report["views"]
    rank = {g: i for i, g in enumerate(granularities.NAMES)}
    official = sorted((name for name in views if views[name]["protocol"] == "official"),
                      key=lambda name: (rank.get(views[name]["granularity"], len(rank)), name))
    for name in official:
        view = views[name]
        shown = measures.keys(view["ks"], [m for m in by_measure(view["measures"]) if measures.BY_NAME[m].at_k])
        retrievers = by_retriever(report, view["retrievers"])
        s = view["summary"]
        blocks: list[Block] = [
            Paragraph(f"{view['description']}. Every one of the {s.get('pairs_all', view['pairs'])} non-abstention "
                      f"pairs is searched; `metrics` average the {view['pairs']} pairs run_retrieval.py averages "
                      f"({s['skipped_without_user_side_evidence']} left out by {s['skip_rule']}; "
                      f"{s['pairs_with_empty_gold']} kept with empty gold)."),
            *_noted(retriever_table(retrievers, shown))]
        every = {n: {**e, "metrics": e["metrics_all"], "intervals": e["intervals_all"], "pairs": e["pairs_all"]}
                 for n, e in retrievers.items() if "metrics_all" in e}
        if every:
            blocks += [Paragraph(f"`metrics_all`: every non-abstention pair, the set print_retrieval_metrics.py "
                                 f"averages ({s.get('pairs_all')} pairs):"),
                       *_noted(retriever_table(every, shown)),
                       Paragraph("recall_all and recall_any follow LongMemEval's code, where a pair with no gold "
                                 "session (its gold keeps only sessions with a user-side `has_answer` turn) scores "
                                 "recall_all = 1 (none of its no gold sessions is missing) and recall_any = ndcg_any "
                                 f"= 0. `metrics_all` holds the {s['skipped_without_user_side_evidence']} pairs "
                                 "without user-side evidence, every one with no gold, so there recall_all can exceed "
                                 "recall_any; `metrics` leaves them out, as run_retrieval.py does "
                                 f"({s['pairs_with_empty_gold']} pairs with empty gold remain in it).")]
        blocks.append(Bullets([Item(f"{m}: {view['measures'][m]}") for m in by_measure(view["measures"])]))
        if "official" in report and view["granularity"] == PRIMARY.granularity:  # the paper's figures are per session
            blocks += published_blocks(report)
        out.append(Section(f"view-{name}", f"View {name}: LongMemEval's own protocol", blocks))
    return out


def diagnostics_sections(report: Mapping[str, Any], ks: list[int], k: int) -> list[Section]:
    d = report["diagnostics"]
    t = d["truncation"]
    recall = measures.key(measures.PRIMARY, k)
    items = [Item(f"{t['truncated_share']:.1%} of the {t['session_texts']} session texts are over 512 tokens "
                  f"(embedded truncated; vipune's own `add` would refuse them); {t['pairs_with_truncated_gold']} "
                  f"pairs have a truncated gold session.",
                  [f"{name}: {recall} {_opt(split['truncated_gold'])} with truncated gold, "
                   f"{_opt(split['untruncated_gold'])} without"
                   for name, split in by_retriever(report, t[recall]).items() if split["truncated_gold"] is not None])]
    bm25 = d["bm25_and_query"]
    if bm25:
        sub = []
        if f"hybrid_vs_hybrid_or_top{k}_differs" in bm25:
            and_name, or_name = bm25["hybrid_and"], bm25["hybrid_or"]
            and_value, or_value = (bm25[f"{recall}_on_empty_and_pairs"][n] for n in (and_name, or_name))
            sub.append(f"{and_name} and {or_name} differ in the top {k} of "
                       f"{bm25[f'hybrid_vs_hybrid_or_top{k}_differs']} pairs; on the empty-AND pairs "
                       f"{recall} is {_opt(and_value)} ({and_name}, AND) vs {_opt(or_value)} ({or_name}, OR).")
        items.append(Item(f"vipune's AND query finds nothing for {bm25['bm25_empty_share']:.1%} of the questions "
                          f"({bm25['bm25_empty_pairs']} pairs); there hybrid search is the semantic order.", sub))
    for lane in lanes.LANES:
        agree = d.get(lane.agreement) if lane.agreement else None
        if agree:
            shares = ", ".join(f"top {kk}: {agree[f'same_top{kk}_share']:.1%}" for kk in ks)
            items.append(Item(f"{lane.retriever} and its mirror `{agree['mirror']}` return the same ranking on "
                              f"{shares} of {agree['pairs']} pairs. A large disagreement means the binary no longer "
                              "does what its contract says."))
    for agree in d.get("lanes", []):
        shares = ", ".join(f"top {kk}: {agree[f'same_top{kk}_share']:.1%}" for kk in ks)
        differ = agree[f"differ_top{max(ks)}"]
        items.append(Item(f"{agree['run']} (vipune's own search code through vipune-lane, on the cached query "
                          f"vectors) and {agree['mirror']} (the binary, with its model) return the same ranking on "
                          f"{shares} of {agree['pairs']} pairs"
                          + (f"; they differ on {len(differ)}: {', '.join(differ)}." if differ else ".")))
    for lane in lanes.LANES:
        seconds = report["retrievers"].get(lane.retriever, {}).get("search_seconds")
        if seconds and lane.latency:
            items.append(Item(f"{lane.retriever} search latency ({lane.latency}): p50 {seconds['p50']:.3f} s, "
                              f"p95 {seconds['p95']:.3f} s, max {seconds['max']:.3f} s over {seconds['calls']} calls"))
    ranks = d["gold_ranks"]
    misses = [r for r in ranks["pairs"] if r[recall] < 1][:20]
    worst = Table(["question", "category", recall, "gold ranks"],
                  [[r["question_id"], r["question_type"], f"{r[recall]:.2f}",
                    ", ".join(f"{g}: {r['gold_ranks'][g] or '–'}" for g in sorted(r["gold_ranks"]))] for r in misses],
                  numeric=[False, False, True, False])
    return [Section("diagnostics", "Diagnostics", [Bullets(items)]),
            Section("worst-pairs", f"Worst pairs for {ranks['retriever']} (gold session ranks; – = not retrieved)",
                    [worst], level=3)]


def embed_section(embed: Mapping[str, Any]) -> Section:
    """The report's "Embed throughput" section."""
    blocks: list[Block] = [Paragraph(f"{embed['definition']}.")]
    if not embed["providers"]:
        return Section("embed", "Embed throughput", blocks + [Bullets([Item(
            f"{embed['why']}; the embed jobs' own time, summed: {embed['job_seconds']:.1f} s.")])])
    items = [Item(f"{embed['texts']} texts ({embed['tokens']} tokens) in {embed['seconds']:.1f} s of model calls by "
                  f"{embed['jobs']} job(s); the embed jobs' own time, summed: {embed['job_seconds']:.1f} s, of it "
                  f"{embed['load_seconds']:.1f} s loading the model; the rest is counting tokens, reading texts and "
                  "waiting on texts other jobs had claimed")]
    for p in embed["providers"]:
        rate = f", {p['useful_gflops_per_s']:.0f} useful GFLOP/s" if "useful_gflops_per_s" in p else ""
        speed = f"{p['texts_per_s']:.1f} texts/s{rate}" if "texts_per_s" in p else "no rate"
        budgets = "/".join(map(str, p["batch_tokens"])) or "not recorded"
        sub = [f"vectors: {p['reproducibility']}"]
        if p["projection"] is None:
            sub.append(f"no projection: {p['why']}")
        else:
            shown = p["projection"]["minutes"]
            minutes = ", ".join(f"{g} rows {shown[g]:.{1 if shown[g] < 10 else 0}f} min" for g in by_granularity(shown))
            session = p["projection"]["workload"].get("session")
            theirs = (f"; LongMemEval_M's session texts average {session['tokens'] / session['texts']:.0f}"
                      if session else "")
            sub += [f"projected: {p['projection']['what']}: {minutes}",
                    f"what this projection rests on: this run's texts (mean {p['tokens'] / p['texts']:.0f} "
                    f"tokens{theirs}; on short texts each model call's overhead weighs more, so the rate "
                    "is lower) and this machine's load while the embed jobs ran. The README's figure "
                    "(docs/performance.md) was measured on a calm 2-core machine on texts of LongMemEval_M's "
                    "lengths: plan a LongMemEval_M run with that one; this one holds only for texts of "
                    "M's lengths on a machine as loaded as this one was."]
        items.append(Item(f"**{p['provider'].upper()}** ({p['device']}): {p['texts']} texts by {p['jobs']} job(s) of "
                          f"{'/'.join(map(str, p['threads']))} thread(s), batches of at most {budgets} tokens: {speed}",
                          sub))
    return Section("embed", "Embed throughput", blocks + [Bullets(items)])


def notes_section(report: Mapping[str, Any]) -> list[Section]:
    counts, defined = report["dataset"]["per_category"], report["measures"]
    return [Section("notes", "", [
        Paragraph("Pairs per category: " + ", ".join(f"{c} {counts[c]}" for c in sorted(counts))),
        Paragraph("Measures: " + "; ".join(f"{m}: {defined[m]}" for m in by_measure(defined)) + ". "
                  "Failed pairs (vipune.on_error: record) are left out of every average.")])]


# ---------------------------------------------------------------- the document


def document(report: Mapping[str, Any]) -> Document:
    """Every section of the report, built once."""
    ks = _primary_ks(report)
    keys = measures.keys(ks, by_measure(report["measures"]))
    k = measures.primary_k(ks)
    table = headline(report)
    warned = warnings(report, table)
    identity = [line for line in (vipune_line(report, short=True), lane_line(report),
                                  model_line(report["provenance"]["model"]),
                                  corpus_line(report) or dataset_line(report)) if line]
    scored = [line for line in (vipune_line(report), lane_line(report), model_line(report["provenance"]["model"]),
                                dataset_line(report), corpus_line(report), f"protocol: {report['protocol']}") if line]
    sections = [  # the warnings first: report.md's first lines after what was scored
        *([Section("warnings", "Warnings", [Bullets(list(map(Item, warned)))])] if warned else []),
        *builds_section(report, keys),
        *overall_section(report, keys),
        *per_category_sections(report, ks),
        *split_section(report, keys),
        *comparisons_section(report),
        *granularities_section(report, k),
        *whatif_section(report),
        *official_sections(report),
        *diagnostics_sections(report, ks, k),
        embed_section(report["embed"]),
        *notes_section(report),
    ]
    builds = report["builds"]
    return Document(
        title="vipune-eval report", pairs=report["pairs"], protocol=report["protocol"], scored=scored,
        identity=identity, warnings=warned, headline=table,
        primary_build=builds[0]["id"] if builds else None,
        primary_source=(builds[0].get("source") or "vipune.binary") if builds else None,
        builds=build_lines(report), sections=sections)

