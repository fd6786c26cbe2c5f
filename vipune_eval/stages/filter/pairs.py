"""filter: a view's pairs (category, gold, dev/test split), its qrels and its counts per category
(what score and report read)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from vipune_eval.core import trec
from vipune_eval.core.filter_summary import FilterSummary
from vipune_eval.core.io import atomic_path, log, write_json
from vipune_eval.errors import EvalError
from vipune_eval.registry import granularities
from vipune_eval.stages.filter import split as splits
from vipune_eval.stages.filter.official import official_rows
from vipune_eval.stages.filter.reader import Instance, Row, has_user_side_evidence, usable_instances

PAIRS_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("question_type", pa.string()),
        ("question", pa.string()),
        ("question_date", pa.string()),
        ("split", pa.string()),
        ("gold", pa.list_(pa.string())),
        ("gold_source", pa.string()),
        ("session_ids", pa.list_(pa.string())),
        # run_retrieval.py's skip rule keeps the pair (some user turn has a truthy has_answer): the
        # official view's `metrics` average these, its `metrics_all` every pair
        ("user_side_evidence", pa.bool_()),
    ]
)


SKIP_RULE = (
    "LongMemEval's run_retrieval.py: a pair is skipped when no user turn of its haystack "
    "has a truthy has_answer (after the 30 _abs abstention questions)"
)


def gold_of(instance: Instance, protocol: str, rows: list[Row]) -> list[str]:
    """Seed: the pair's gold sessions. Official: every corpus id holding ``answer``."""
    if protocol != "official":
        return instance.pair["gold"]
    return list(dict.fromkeys(r.doc for r in rows if "answer" in r.doc))


def run_pairs(
    dataset: Path,
    protocol: str,
    granularity: str,
    pairs_out: Path,
    qrels_out: Path,
    summary_out: Path,
    expected: dict[str, int] | None,
    split_seed: int,
    dev_fraction: float,
) -> FilterSummary:
    """The view's pairs (category, gold, split), its qrels and its counts per category."""
    granularity = granularities.get(granularity).name
    official = protocol == "official"
    counts: Counter = Counter()
    pairs: list[dict[str, Any]] = []
    all_pairs: list[tuple[str, str]] = []  # every usable pair: the split is decided over these
    gold_sources: Counter = Counter()
    empty_gold = empty_gold_all = 0
    for instance in usable_instances(dataset, counts, expected.get("instances") if expected else None):
        pair = instance.pair
        all_pairs.append((pair["question_id"], pair["question_type"]))
        rows = official_rows(instance, granularity) if official else []
        pair = {**pair, "user_side_evidence": has_user_side_evidence(instance)}
        gold = gold_of(instance, protocol, rows)
        if official:
            empty_gold += not gold and pair["user_side_evidence"]  # in run_retrieval.py's set
            empty_gold_all += not gold
            pair = {**pair, "gold": gold, "gold_source": "official: ids holding 'answer'"}
        pairs.append(
            {
                k: pair[k]
                for k in (
                    "question_id",
                    "question_type",
                    "question",
                    "question_date",
                    "gold",
                    "gold_source",
                    "session_ids",
                    "user_side_evidence",
                )
            }
        )
        gold_sources[pair["gold_source"]] += 1
        counts["session_slots"] += len(pair["session_ids"])
    labels = splits.assign(all_pairs, split_seed, dev_fraction)
    for pair in pairs:
        pair["split"] = labels[pair["question_id"]]
    summary: FilterSummary = {
        "protocol": protocol,
        "granularity": granularity,
        "instances": counts["instances"],
        "abstention": counts["abstention"],
        "pairs": len(pairs),
        "per_category": dict(sorted(Counter(p["question_type"] for p in pairs).items())),
        "gold_source": dict(gold_sources),
        "session_slots": counts["session_slots"],
        "created_at_policy": "haystack_dates of the session (UTC); 2000-01-01 + index minutes when absent",
        "split": {
            "seed": split_seed,
            "dev_fraction": dev_fraction,
            "dev": sum(p["split"] == "dev" for p in pairs),
            "test": sum(p["split"] == "test" for p in pairs),
        },
    }
    if official:
        summary["skip_rule"] = SKIP_RULE
        # "pairs": the set run_retrieval.py averages (its `metrics`); "pairs_all": every
        # non-abstention pair, all searched and in the qrels (print_retrieval_metrics.py's set)
        summary["skipped_without_user_side_evidence"] = sum(not p["user_side_evidence"] for p in pairs)
        summary["pairs_all"] = len(pairs)
        summary["pairs"] = len(pairs) - summary["skipped_without_user_side_evidence"]
        summary["pairs_with_empty_gold"] = empty_gold
        summary["pairs_all_with_empty_gold"] = empty_gold_all
    check_expected(dataset, summary, len(all_pairs), expected)
    with atomic_path(pairs_out) as tmp:
        pq.write_table(pa.Table.from_pylist(pairs, schema=PAIRS_SCHEMA), tmp)
    trec.write_qrels(qrels_out, {p["question_id"]: p["gold"] for p in pairs})
    write_json(summary_out, summary)
    log.info(
        "filter (%s, %s): %d instances, %d abstention, %d pairs",
        protocol,
        granularity,
        summary["instances"],
        summary["abstention"],
        summary["pairs"],
    )
    return summary


def check_expected(dataset: Path, summary: FilterSummary, usable: int, expected: dict[str, int] | None) -> None:
    if usable == 0:
        raise EvalError(
            f"{dataset}: zero usable pairs ({summary['instances']} instances, {summary['abstention']} abstention)"
        )
    if expected is None:
        return
    found = {"instances": summary["instances"], "abstention": summary["abstention"], "pairs": usable}
    wrong = {k: (v, found[k]) for k, v in expected.items() if found[k] != v}
    if wrong:
        detail = ", ".join(f"{k}: expected {want}, found {got}" for k, (want, got) in wrong.items())
        raise EvalError(
            f"{dataset}: counts differ from dataset.expected ({detail}); per category: {summary['per_category']}",
            fix="wrong file? Fix dataset.filename or dataset.path; for another file on "
            "purpose, set dataset.expected to its counts, or to null to skip the check",
        )
