"""Why vipune misses: truncation, the empty AND query, agreement with its mirrors, gold ranks."""

from __future__ import annotations

from typing import Any

from vipune_eval.registry import measures


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def truncation(
    pairs: list[dict[str, Any]],
    gold: dict[str, set[str]],
    truncated: dict[str, bool],
    metrics: dict[str, dict[str, Any]],
    k: int,
) -> dict[str, Any]:
    """Share of row texts over the model's 512 tokens, and recall@k with and without them.

    ``pairs``: per pair its rows (``row_sessions``, ``row_text_ids``); ``gold``: question id →
    its gold sessions (the qrels); ``truncated``: text id → cut at the model's limit when embedded."""
    key = measures.key(measures.PRIMARY, k)
    rows = {t for p in pairs for t in p["row_text_ids"]}
    hit = {
        p["question_id"]
        for p in pairs
        if any(
            truncated[t] for s, t in zip(p["row_sessions"], p["row_text_ids"]) if s in gold.get(p["question_id"], ())
        )
    }
    out: dict[str, Any] = {
        "session_texts": len(rows),
        "truncated_share": sum(truncated[t] for t in rows) / len(rows),
        "pairs_with_truncated_gold": len(hit),
        key: {},
    }
    for name, entry in metrics.items():
        rows = entry["per_query"]
        out[key][name] = {
            "truncated_gold": _mean([r[key] for q, r in rows.items() if q in hit]),
            "untruncated_gold": _mean([r[key] for q, r in rows.items() if q not in hit]),
        }
    return out


def empty_and_query(metrics: dict[str, dict[str, Any]], k: int, roles: dict[str, str | None]) -> dict[str, Any] | None:
    """How often vipune's AND query finds nothing, and what an OR query changes in the fusion.
    ``roles`` names the configured runs with the settings compared (plan.manifest.roles):
    ``bm25_and``, ``hybrid_and``, ``hybrid_or``."""
    bm25, hybrid_name, or_name = roles.get("bm25_and"), roles.get("hybrid_and"), roles.get("hybrid_or")
    if bm25 not in metrics:
        return None
    rows = metrics[bm25]["per_query"]
    empty = {q for q, r in rows.items() if not r["ranked"]}
    out: dict[str, Any] = {"bm25_empty_share": len(empty) / len(rows), "bm25_empty_pairs": len(empty)}
    if hybrid_name in metrics and or_name in metrics:
        hybrid, hybrid_or = metrics[hybrid_name]["per_query"], metrics[or_name]["per_query"]
        differ = [q for q in hybrid if hybrid[q]["ranked"][:k] != hybrid_or[q]["ranked"][:k]]
        out["hybrid_and"], out["hybrid_or"] = hybrid_name, or_name
        out[f"hybrid_vs_hybrid_or_top{k}_differs"] = len(differ)
        key = measures.key(measures.PRIMARY, k)
        out[f"{key}_on_empty_and_pairs"] = {
            hybrid_name: _mean([hybrid[q][key] for q in empty]),
            or_name: _mean([hybrid_or[q][key] for q in empty]),
        }
    return out


def agreement(
    metrics: dict[str, dict[str, Any]], ks: list[int], binary: str, mirror: str | None
) -> dict[str, Any] | None:
    """Per pair, does the binary's top k equal its reference mirror's? It should: `vipune` mirrors
    `hybrid`, `vipune-semantic` mirrors `dense` (a disagreement of the first pair but not of the
    second sits in the fusion, not in the dense arm); the mirror is the configured reference run
    with the family setting the binary's search mirrors (plan.manifest.mirror_of). Both are
    compared on the pairs both scored (``pairs``); ``only_run`` and ``only_mirror`` name the pairs
    one of them scored and the other did not (a failed pair, vipune.on_error: record)."""
    if mirror is None or binary not in metrics or mirror not in metrics:
        return None
    vipune, hybrid = metrics[binary]["per_query"], metrics[mirror]["per_query"]
    shared = sorted(set(vipune) & set(hybrid))
    out: dict[str, Any] = {
        "run": binary,
        "pairs": len(shared),
        "mirror": mirror,
        "run_pairs": len(vipune),
        "mirror_pairs": len(hybrid),
        "only_run": sorted(set(vipune) - set(hybrid)),
        "only_mirror": sorted(set(hybrid) - set(vipune)),
    }
    for k in ks:
        same = [q for q in shared if vipune[q]["ranked"][:k] == hybrid[q]["ranked"][:k]]
        out[f"same_top{k}_share"] = len(same) / len(shared) if shared else None
    k = max(ks)
    out[f"differ_top{k}"] = [q for q in shared if vipune[q]["ranked"][:k] != hybrid[q]["ranked"][:k]]
    return out


def gold_ranks(entry: dict[str, Any], gold: dict[str, set[str]], k: int) -> list[dict[str, Any]]:
    """Per pair, the rank of each gold session (None: not in the results), worst pairs first."""
    recall, mrr = measures.key(measures.PRIMARY, k), measures.key("mrr")
    rows = []
    for qid, row in entry["per_query"].items():
        ranked = row["ranked"]
        ranks = {g: (ranked.index(g) + 1 if g in ranked else None) for g in sorted(gold[qid])}
        rows.append(
            {
                "question_id": qid,
                "question_type": row["question_type"],
                recall: row[recall],
                mrr: row[mrr],
                "gold_ranks": ranks,
            }
        )
    rows.sort(key=lambda r: (r[recall], r[mrr], r["question_id"]))
    return rows
