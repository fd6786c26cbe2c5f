"""report: the numbers, their intervals, paired comparisons, diagnostics and provenance, as
report.json for scripts and report.md for people.

Its inputs come from a manifest (written at parse time, plan.manifest.report_manifest) that names
every view, every run's metrics and every build. ``load`` reads every file the report needs, once;
``build`` turns what was loaded into the report (pure: no file is read there, so it is tested on
hand-made inputs) of the shape stages.report.report_json types (``Report``);
stages.report.sections makes its document, which report.md (stages.report.markdown) and the summary
(stages.report.summary) render.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from vipune_eval import __version__
from vipune_eval.core.filter_summary import SPLIT_RULE, SPLITS, FilterSummary
from vipune_eval.core.fingerprints import ModelFingerprint
from vipune_eval.core.io import dump_json, read_json, read_parquet, write_text
from vipune_eval.core.report_inputs import LabManifest, LabRun, Manifest, ManifestView
from vipune_eval.core.trec import read_qrels
from vipune_eval.errors import EvalError
from vipune_eval.registry import lanes, measures, models
from vipune_eval.registry.views import PRIMARY
from vipune_eval.stages.embed import projection
from vipune_eval.stages.embed.tally import Tally, read_tallies
from vipune_eval.stages.report import diagnostics, explain, markdown, summary, whatif
from vipune_eval.stages.report.compare import adjust_family, compare_scored
from vipune_eval.stages.report.published import PUBLISHED, beside_published
from vipune_eval.stages.report.report_json import (
    BuildEntry,
    DatasetFingerprint,
    Diagnostics,
    GranularityBlock,
    PreflightResult,
    Report,
    RetrieverEntry,
    ViewBlock,
    ViewCounts,
    VipuneFingerprint,
    VipuneLaneFingerprint,
    WhatIf,
)
from vipune_eval.stages.report.sections.contents import document
from vipune_eval.vipune.release import RELEASE


@dataclass
class LoadedView:
    """One view as the report needs it: its manifest entry and what its files hold."""

    entry: ManifestView  # the manifest's entry (names, paths, ks, measures)
    summary: FilterSummary
    metrics: dict[str, dict[str, Any]]  # run name → the score stage's metrics
    counts: ViewCounts


@dataclass
class Loaded:
    """Everything the report reads, read once (``load``)."""

    manifest: Manifest
    views: list[LoadedView]  # the primary first
    gold: dict[str, set[str]]  # the primary view's qrels
    rows: list[dict[str, Any]]  # the primary view's rows: each pair's row_sessions and row_text_ids
    truncated: dict[str, bool]  # text id → cut at the model's limit (the primary's texts)
    tallies: list[Tally]  # the embed jobs' tallies, every view's shards
    builds: dict[str, dict[str, Any]]  # build id → its primary-view metrics (vipune.compare)
    lab: dict[str, dict[str, Any]]  # what-if run name → its metrics (runs not configured)
    fingerprints: dict[str, VipuneFingerprint]  # build id → fingerprint
    preflights: dict[str, PreflightResult]  # build id → preflight result
    dataset: DatasetFingerprint
    model: ModelFingerprint
    config: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)  # build id → where it came from
    lanes: dict[str, VipuneLaneFingerprint] = field(default_factory=dict)  # build id → its vipune-lane's fingerprint


def _view_counts(view: ManifestView) -> ViewCounts:
    rows = read_parquet(view["rows"], columns=["row_keys"]).column("row_keys")
    tokens = texts = 0
    for path in view["embeddings"]:
        column = read_parquet(path, columns=["tokens"]).column("tokens")
        tokens += int(sum(column.to_pylist()))
        texts += len(column)
    return {"rows": sum(len(r) for r in rows.to_pylist()), "unique_texts": texts, "tokens_embedded": tokens}


def _truncated(embeddings: list[str]) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for path in embeddings:
        table = read_parquet(path, columns=["text_id", "truncated"])
        out.update(zip(table.column("text_id").to_pylist(), table.column("truncated").to_pylist()))
    return out


def load(manifest: Manifest) -> Loaded:
    views = [
        LoadedView(
            v, read_json(v["summary"]), {name: read_json(path) for name, path in v["metrics"].items()}, _view_counts(v)
        )
        for v in manifest["views"]
    ]
    primary = manifest["views"][0]
    lab = manifest.get("whatif")
    lab_runs = [lab["base"], *lab["variants"]] if lab else []
    return Loaded(
        manifest=manifest,
        views=views,
        gold={qid: set(docs) for qid, docs in read_qrels(primary["qrels"]).items()},
        rows=read_parquet(primary["rows"], ["question_id", "row_sessions", "row_text_ids"]).to_pylist(),
        truncated=_truncated(primary["embeddings"]),
        tallies=read_tallies(list(dict.fromkeys(p for v in manifest["views"] for p in v["embeddings"]))),
        builds={b: read_json(path) for b, path in primary["builds"].items()},
        lab={e["name"]: read_json(e["metrics"]) for e in lab_runs if e["name"] not in views[0].metrics},
        fingerprints={b: read_json(path) for b, path in manifest["fingerprints"].items()},
        preflights={b: read_json(path) for b, path in manifest["preflight"].items()},
        dataset=read_json(manifest["dataset_fp"]),
        model=read_json(manifest["model_fp"]),
        config=read_json(manifest["config"]),
        sources=read_json(manifest["sources"]) if Path(manifest.get("sources") or "").is_file() else {},
        lanes={b: read_json(path) for b, path in manifest["lanes"].items()},
    )


# Each setting a run's metrics record (stages.score.Scoring, its ranking settings flattened: ``settings``),
# in the words of a stale run's message.
SETTING_WORDS = {
    "ks": "ks",
    "measure_names": "measures",
    "limit": "search limit",
    "depth": "documents kept per pair",
    "collapse": "rows collapsed to sessions",
    "turn_to_session": "LongMemEval's turn→session scoring",
}
SCORE_SETTINGS = ("ks", "measure_names", "turn_to_session")  # the score's own: --forcerun score makes them again
STALE_NAMED = 10  # a stale-run error names at most this many runs


def settings(scored_with: Mapping[str, Any]) -> dict[str, Any]:
    """A ``scored_with`` as one level of SETTING_WORDS' keys: what the searches ranked to
    (``ranking_settings``) as settings of their own."""
    flat = {k: v for k, v in scored_with.items() if k != "ranking_settings"}
    return {**flat, **(scored_with.get("ranking_settings") or {})}


def stale_runs(loaded: Loaded) -> None:
    """Refuse a report that would state settings its runs were not made with: each scored run's
    metrics record the settings its score and searches were given (``scored_with``), and each must
    be its view's (the manifest's, from this config). A changed ``search_limit`` or ``ks`` reruns
    none of them under ``--rerun-triggers mtime``; the error names each stale run and the fix."""
    searched_by = loaded.manifest["searched_by"]
    stale: list[str] = []
    rules: set[str] = set()
    for view in loaded.views:
        stated = settings(view.entry["scored_with"])
        made = list(view.metrics.values())
        if view is loaded.views[0]:  # the compared builds and the what-if runs are scored there only
            made += [*loaded.builds.values(), *loaded.lab.values()]
        for metrics in made:
            recorded = settings(metrics["scored_with"]) if metrics.get("scored_with") else None
            if recorded == stated:
                continue
            if recorded is None:
                said = "no settings recorded (scored by an earlier vipune-eval)"
            else:
                said = ", ".join(
                    f"{word} {recorded.get(key)}, not {stated.get(key)}"
                    for key, word in SETTING_WORDS.items()
                    if recorded.get(key) != stated.get(key)
                )
            run = metrics["retriever"]
            stale.append(f"{run} in the {view.entry['name']} view: {said}")
            rules.add("score")
            if recorded is None or any(recorded.get(k) != v for k, v in stated.items() if k not in SCORE_SETTINGS):
                rules.update(searched_by.get(run, []))
    if stale:
        more = f"; and {len(stale) - STALE_NAMED} more" if len(stale) > STALE_NAMED else ""
        raise EvalError(
            f"{len(stale)} run(s) were made with other settings than this config states, and the report would "
            f"state these for them: {'; '.join(stale[:STALE_NAMED])}{more}",
            fix="these runs are stale (a changed setting reruns nothing under --rerun-triggers mtime): run the same "
            "command without --rerun-triggers mtime, whose default triggers rerun what the setting changes, "
            f"or force them: --forcerun {' '.join(sorted(rules))}",
        )


def changes(
    current: dict[str, Any], baseline: dict[str, Any], gold: dict[str, set[str]], ks: list[int]
) -> list[dict[str, Any]]:
    """Pairs whose gold sessions in the top k differ between the baseline and the current run:
    the gold sessions the current run gained and lost at each such k, and recall@k [before, after]
    (before: the baseline)."""
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
                entry[measures.key(measures.PRIMARY, k)] = [
                    len(found_before) / len(relevant),
                    len(found_now) / len(relevant),
                ]
        if entry:
            out.append({"question_id": qid, "question_type": current["per_query"][qid]["question_type"], **entry})
    return out


def retriever_entry(m: Mapping[str, Any]) -> RetrieverEntry:
    """A run's metrics as report.json keeps them: the keys ``RetrieverEntry`` names (the per-pair
    rows, per-split means and settings left out)."""
    return cast(RetrieverEntry, {key: m[key] for key in RetrieverEntry.__annotations__ if key in m})


def _view_block(view: LoadedView) -> ViewBlock:
    e = view.entry
    return {
        "protocol": e["protocol"],
        "granularity": e["granularity"],
        "description": e["description"],
        "ks": e["ks"],
        "scored_with": e["scored_with"],
        "pairs": view.summary["pairs"],
        "qrels": e["qrels"],
        "summary": view.summary,
        "measures": measures.definitions(e["measures"]),
        **view.counts,
        "retrievers": {name: retriever_entry(m) for name, m in view.metrics.items()},
    }


def loaded_metrics(loaded: Loaded) -> dict[str, dict[str, Any]]:
    """The primary view's metrics already read, by their manifest path."""
    primary = loaded.views[0]
    return {
        **{primary.entry["metrics"][name]: m for name, m in primary.metrics.items()},
        **{primary.entry["builds"][b]: m for b, m in loaded.builds.items()},
    }


def build(loaded: Loaded) -> Report:
    """The report from what ``load`` read (no file is read here); refused where a run was made with
    other settings than the config states (``stale_runs``)."""
    stale_runs(loaded)
    manifest = loaded.manifest
    primary = loaded.views[0]
    ks = primary.entry["ks"]
    keys = measures.keys(ks, primary.entry["measures"])
    k = measures.primary_k(ks)
    counts = primary.summary  # the filter's summary of the primary view
    metrics = primary.metrics
    views = {view.entry["name"]: _view_block(view) for view in loaded.views}
    block = views[primary.entry["name"]]  # the primary's numbers are the report's headline
    report: Report = {
        "pairs": block["pairs"],
        "qrels": block["qrels"],
        "protocol": block["description"],
        "measures": block["measures"],
        "dataset": block["summary"],
        "retrievers": block["retrievers"],
        # report.json's keys are sorted: the configured order, vipune's lanes first, is kept here
        "retriever_order": lanes.first([n for n in manifest["retrievers"] if n in metrics]),
        "retriever_settings": manifest.get("settings", {}),
        "corpus": manifest.get("corpus"),
    }
    subject = lanes.subject(list(metrics))
    report["comparisons"] = {
        f"{subject} vs {other}": compare_scored(metrics[subject], metrics[other], keys, subject, other)
        for other in metrics
        if other != subject
    }
    report["views"] = views
    report["builds"] = builds(loaded, keys, ks)
    report["builds_compared_on"] = manifest.get("compared_on") if report["builds"] else None
    entry = next((b for b in report["builds"][1:] if b["id"] == manifest.get("baseline")), None)
    if entry:
        report["baseline"] = {"vipune": loaded.fingerprints[entry["id"]], **entry}
    report["splits"] = {
        name: {
            "pairs": counts["split"][name],
            "retrievers": {
                r: {
                    "pairs": m["per_split"][name]["pairs"],
                    "metrics": {key: m["per_split"][name][key] for key in keys},
                    "intervals": m["per_split"][name]["intervals"],
                }
                for r, m in metrics.items()
                if name in m["per_split"]
            },
        }
        for name in SPLITS
    }
    report["granularities"] = granularities(loaded.views, views, keys)
    if lab := manifest.get("whatif"):
        report["whatif"] = whatif_block(lab, {**loaded.lab, **metrics})
    official = [v for v in loaded.views if v.entry["protocol"] == "official"]
    if official and official[0].entry["granularity"] == PRIMARY.granularity:
        view = official[0].entry
        block = report["views"][view["name"]]
        report["official"] = {
            "protocol": view["description"],
            "pairs": block["pairs"],
            "skipped_without_user_side_evidence": block["summary"]["skipped_without_user_side_evidence"],
            "pairs_with_empty_gold": block["summary"]["pairs_with_empty_gold"],
            "skip_rule": block["summary"]["skip_rule"],
            "qrels": view["qrels"],
            "pairs_all": block["summary"]["pairs_all"],
            "ks": view["ks"],
            "measures": block["measures"],
            "retrievers": block["retrievers"],
            "published": PUBLISHED,
            "beside_published": beside_published(block["retrievers"], report.get("corpus")),
        }
    mirrors, roles = manifest["mirrors"], manifest["roles"]
    # cast: each lane's agreement with its mirror is under registry.lanes' key, not a literal here
    report["diagnostics"] = cast(
        Diagnostics,
        {
            "truncation": diagnostics.truncation(loaded.rows, loaded.gold, loaded.truncated, metrics, k),
            "bm25_and_query": diagnostics.empty_and_query(metrics, k, roles),
            **{
                key: diagnostics.agreement(metrics, ks, run, mirrors.get(run))
                for lane in lanes.LANES
                for run, key in lane.agreement_keys().items()
            },
            "gold_ranks": {"retriever": subject, "pairs": diagnostics.gold_ranks(metrics[subject], loaded.gold, k)},
            # vipune's own search code (the vipune-lane) against the binary, in every view: they should agree
            # on every pair, and score the same pairs
            "lanes": [
                {"view": view.entry["name"], **agree}
                for view in loaded.views
                for lane in lanes.LANES
                for run, binary in lane.counterparts().items()
                if (agree := diagnostics.agreement(view.metrics, view.entry["ks"], run, binary))
            ],
        },
    )
    report["embed"] = projection.summary(loaded.tallies, projection.LONGMEMEVAL_M)
    primary_build = manifest.get("primary")
    report["provenance"] = {
        "dataset": loaded.dataset,
        "model": models.provenance(loaded.model, (loaded.config.get("model") or {}).get("path")),
        "vipune": loaded.fingerprints[primary_build] if primary_build else None,
        "lane": loaded.lanes.get(primary_build) if primary_build else None,
        "preflight": loaded.preflights.get(primary_build) if primary_build else None,
        "builds": loaded.fingerprints,
        "contract_release": RELEASE,  # the vipune release docs/vipune-contract.md was checked against
        "split": {
            "seed": counts["split"]["seed"],
            "dev_fraction": counts["split"]["dev_fraction"],
            "rule": SPLIT_RULE,
        },
        "views": {view.entry["name"]: view.entry["description"] for view in loaded.views},
        "config": loaded.config,
        "package": {"name": "vipune-eval", "version": __version__},
    }
    return report


def whatif_block(lab: LabManifest, metrics: dict[str, dict[str, Any]]) -> WhatIf:
    """The what-if grid chosen on one split and confirmed on the other (stages.report.whatif)."""

    def run(entry: LabRun) -> dict[str, Any]:  # analyse reads its name, params, run and per_query
        return {**entry, "per_query": metrics[entry["name"]]["per_query"]}

    block = whatif.analyse(lab["measure"], lab["select_on"], run(lab["base"]), [run(v) for v in lab["variants"]])
    return cast(WhatIf, {**block, "grid": lab["grid"]})  # analyse's keys: one is named by a split


def builds(loaded: Loaded, keys: list[str], ks: list[int]) -> list[BuildEntry]:
    """One entry per vipune build, the primary first, each with where it came from and its
    vipune-lane (where this run has one: the lib lane's builds); the others compared with the
    primary, Holm over every comparison of every build, before → after: the compared build → the
    primary (a release → the checkout of the maintainer's loop, vipune.baseline → vipune.binary)."""
    manifest, metrics = loaded.manifest, loaded.views[0].metrics
    primary_id, compared_on = manifest.get("primary"), manifest.get("compared_on")
    if not primary_id or compared_on is None or compared_on not in metrics:
        return []
    # the order is the configuration's (vipune.compare)
    runs = {primary_id: metrics[compared_on], **{b: loaded.builds[b] for b in manifest["builds"]}}
    out: list[BuildEntry] = []
    for build_id, m in runs.items():
        fingerprint = loaded.fingerprints[build_id]
        # cast: mypy cannot tell that the retriever entry holds none of BuildEntry's own keys
        entry = cast(
            BuildEntry,
            {
                "id": build_id,
                "version": fingerprint["version"],
                "sha256": fingerprint["sha256"],
                "source": loaded.sources.get(build_id),
                "lane": loaded.lanes.get(build_id),
                **retriever_entry(m),
            },
        )
        if build_id in loaded.preflights:
            preflight = loaded.preflights[build_id]
            entry["follows_contract"] = preflight.get("follows_contract", True)
            entry["failed_checks"] = preflight.get("failed_checks", [])
            entry["drift"] = preflight.get("drift", entry["failed_checks"])
        out.append(entry)
    # before → after: each compared build (the baseline: a release) → vipune.binary (the checkout),
    # so a difference is after − before and a change's values are [before, after]
    primary = runs[primary_id]
    compared = adjust_family(
        {b: compare_scored(primary, m, keys, primary_id, b) for b, m in runs.items() if b != primary_id}
    )
    for entry in out[1:]:
        entry["comparison"] = compared[entry["id"]]
        entry["changes"] = changes(primary, runs[entry["id"]], loaded.gold, ks)
    return out


def granularities(
    views: list[LoadedView], blocks: dict[str, ViewBlock], keys: list[str]
) -> dict[str, GranularityBlock]:
    """The seed protocol's granularities side by side (their views' ``blocks``' numbers); each
    against session, per retriever."""
    seed = [v for v in views if v.entry["protocol"] == "seed"]
    if len(seed) < 2:
        return {}
    session = seed[0].metrics
    out: dict[str, GranularityBlock] = {}
    for view in seed:
        g, block = view.entry["granularity"], blocks[view.entry["name"]]
        out[g] = {
            "pairs": block["pairs"],
            "rows": block["rows"],
            "unique_texts": block["unique_texts"],
            "tokens_embedded": block["tokens_embedded"],
            "retrievers": block["retrievers"],
        }
        if g != PRIMARY.granularity:
            out[g]["vs_session"] = {
                name: compare_scored(e, session[name], keys, f"{name} ({g})", f"{name} (session)")
                for name, e in view.metrics.items()
                if name in session
            }
    return out


def run_report(manifest: Path, out_json: Path, out_md: Path, out_summary: Path) -> Report:
    loaded = load(read_json(manifest))
    report = build(loaded)
    # the pairs a build moved and the worst pairs, explained from the lib lane's arms (read here)
    report["explanations"] = explain.report_explanations(report, loaded.manifest, loaded_metrics(loaded))
    text = dump_json(report, out_json)
    write_text(out_json, text)
    doc = document(json.loads(text))  # report.json as the HTML page reads it: the same document
    write_text(out_md, markdown.markdown(doc))
    write_text(out_summary, summary.text(doc))
    return report
