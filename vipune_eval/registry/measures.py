"""The table of measures: every metric key, what computes it and its definition (one owner).

Each measure says what computes it: ir-measures (its ``ir_measures`` form, trec_eval through
pytrec-eval-terrier) or, where ir-measures lacks it, its own ``compute``; one LongMemEval's code
defines (``longmemeval``) takes its value from core.longmemeval under the official protocol.
stages.score asks each measure (``computed_by``) and never names one. Score, report,
diagnostics and plots read this table and build metric keys with ``key``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

# A measure's own formula: (the pair's documents best first, its gold documents, the cut-off k or
# None) → the pair's value.
Compute = Callable[[Sequence[str], Sequence[str], int | None], float]

IR_MEASURES, OWN, LONGMEMEVAL = "ir-measures", "own", "longmemeval"  # what computes a measure


@dataclass(frozen=True)
class Measure:
    name: str  # the key prefix: recall → recall@5
    binary: bool  # per-pair values are 0/1 (Wilson intervals, McNemar tests)
    at_k: bool  # one value per cut-off k
    definition: str
    ir_measures: str | None = None  # its ir-measures (trec_eval) form, where ir-measures computes it
    compute: Compute | None = None  # its own formula, where ir-measures lacks it
    longmemeval: bool = False  # LongMemEval's code defines it: the official protocol takes its value from there

    def __post_init__(self) -> None:
        if self.ir_measures and self.compute:
            raise ValueError(f"measure {self.name}: ir-measures computes it, or its own compute does, not both")
        if not (self.ir_measures or self.compute or self.longmemeval):
            raise ValueError(
                f"measure {self.name}: nothing computes it (an ir-measures form, a compute, or longmemeval)"
            )

    def computed_by(self, official: bool) -> str:
        """What computes it under the official protocol (``official``) or the seed protocol:
        LONGMEMEVAL, IR_MEASURES or OWN (its ``compute``)."""
        if official and self.longmemeval:
            return LONGMEMEVAL
        if self.ir_measures or self.compute:
            return IR_MEASURES if self.ir_measures else OWN
        raise ValueError(f"measure {self.name} is LongMemEval's alone: only the official protocol computes it")


def _all_in_top_k(ranked: Sequence[str], gold: Sequence[str], k: int | None) -> float:
    """1 if every gold document is in the top k (0 for a pair without gold)."""
    return float(bool(gold) and set(gold) <= set(ranked[:k]))


MEASURES: tuple[Measure, ...] = (
    Measure(
        "recall",
        False,
        True,
        "|gold ∩ top-k| / |gold| per pair, averaged over pairs (the primary number; trec_eval R@k)",
        ir_measures="R@{k}",
    ),
    Measure(
        "recall_any",
        True,
        True,
        "1 if at least one gold session is in the top k (trec_eval Success@k)",
        ir_measures="Success@{k}",
        longmemeval=True,
    ),
    Measure(
        "recall_all",
        True,
        True,
        "1 if every gold session is in the top k (R@k = 1; LongMemEval's recall_all@k)",
        compute=_all_in_top_k,
        longmemeval=True,
    ),
    Measure(
        "ndcg",
        False,
        True,
        "trec_eval nDCG@k: DCG = Σ rel_i / log2(i + 1), ideal DCG from the gold sessions",
        ir_measures="nDCG@{k}",
    ),
    Measure(
        "ndcg_any",
        False,
        True,
        "LongMemEval's ndcg_any@k (src/retrieval/eval_utils.py): DCG = rel_1 + Σ_{i≥2} rel_i / "
        "log2 i (ranks 1 and 2 undiscounted), ideal DCG from the corpus's relevances cut to k",
        longmemeval=True,
    ),
    Measure("mrr", False, False, "1 / rank of the first gold session, 0 if none (trec_eval RR)", ir_measures="RR"),
)
BY_NAME = {m.name: m for m in MEASURES}

SEED = ("recall", "recall_any", "recall_all", "ndcg", "mrr")  # the seed protocol's measures
OFFICIAL = ("recall", "recall_any", "recall_all", "ndcg", "ndcg_any", "mrr")
OFFICIAL_TURN = ("recall_any", "recall_all", "ndcg_any")  # LongMemEval's turn→session scoring
OFFICIAL_KS = (1, 3, 5, 10, 30, 50)  # LongMemEval's cut-offs (run_retrieval.py)

PRIMARY = "recall"
PRIMARY_K = 5  # the k of headline comparisons and diagnostics when configured


def primary_k(ks: Sequence[int]) -> int:
    return PRIMARY_K if PRIMARY_K in ks else max(ks)


def key(name: str, k: int | str | None = None) -> str:
    """The metric key of measure ``name`` at cut-off ``k``: recall, 5 → recall@5; mrr → mrr
    (a ``k`` of "k": the key as the docs name it)."""
    return f"{name}@{k}" if BY_NAME[name].at_k else name


def cutoff(metric_key: str) -> int | None:
    """The k of a metric key (recall@5 → 5; mrr → None)."""
    return int(metric_key.split("@", 1)[1]) if "@" in metric_key else None


def keys(ks: Sequence[int], names: Sequence[str] = SEED) -> list[str]:
    """Metric keys in table order: every at-k measure at every k, then the others."""
    out = [key(name, k) for name in names if BY_NAME[name].at_k for k in ks]
    return out + [key(name) for name in names if not BY_NAME[name].at_k]


def measure_of(metric_key: str) -> Measure:
    return BY_NAME[metric_key.split("@", 1)[0]]


def is_binary(metric_key: str) -> bool:
    """True for metric keys whose per-pair values are 0/1 (recall_any@k, recall_all@k)."""
    return measure_of(metric_key).binary


def definitions(names: Sequence[str]) -> dict[str, str]:
    return {name: BY_NAME[name].definition for name in names}
