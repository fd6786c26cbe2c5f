"""The embed stage's rate and what it projects for bge-small on LongMemEval_M.

Useful FLOPs count the tokens the model sees (cut at its limit, no padding: the batches hold texts
of one length) times a BERT encoder's layer shapes, attention at each text's own length
(``flops_per_token``). The embed jobs' tallies (stages.embed.tally) give this run's useful FLOP/s;
LongMemEval_M's texts per granularity (``LONGMEMEVAL_M``) turn it into minutes.
"""

from __future__ import annotations

from vipune_eval.stages.embed.tally import Tally

# The texts each granularity's view of LongMemEval_M embeds (every unique text once, questions
# included): their number and the sums of their lengths and squared lengths in tokens (the BERT
# uncased WordPiece vocabulary bge-small shares, cut at 512), measured on a generated file of M's
# shape (470 pairs x 500 sessions x 12 turns x 150 words, 2.6 GB; 2026-12-04). Keyed by
# granularity name (vipune_eval.registry.granularities.NAMES, checked by a test).
LONGMEMEVAL_M = {
    "session": {"texts": 21_126, "tokens": 10_583_929, "squares": 5_414_999_643},
    "turn": {"texts": 248_342, "tokens": 52_774_479, "squares": 11_257_345_673},
    "chunk": {"texts": 124_406, "tokens": 52_526_607, "squares": 22_294_297_893},
}


BGE_SMALL = {"layers": 12, "hidden": 384, "intermediate": 1536}  # BAAI/bge-small-en-v1.5's config.json


def flops_per_token(layers: int, hidden: int, intermediate: int, seq) -> float:
    """Forward FLOPs per token of a BERT encoder at sequence length ``seq``: 2 x the matmul
    parameters (Q, K, V, output: 4h^2; FFN: 2hi) plus attention scores and context (2 seq h
    each). Embeddings, layer norms, softmax and GELU are left out."""
    return layers * (2 * (4 * hidden * hidden + 2 * hidden * intermediate) + 4 * seq * hidden)


def workload_flops(shape: dict[str, int], tokens: float, squares: float) -> float:
    """FLOPs of texts whose lengths sum to ``tokens`` and whose squared lengths to ``squares``."""
    return flops_per_token(**shape, seq=0) * tokens + 4 * shape["layers"] * shape["hidden"] * squares


def summary(tallies: list[Tally], workload: dict[str, dict[str, int]]) -> dict:
    """The run's embed rate and, from it, bge-small's time on LongMemEval_M per granularity;
    ``workload``: each granularity's texts of M (``LONGMEMEVAL_M``)."""
    texts = sum(t.texts for t in tallies)
    seconds = sum(t.seconds for t in tallies)
    threads = sorted({t.threads for t in tallies if t.texts})
    out = {"definition": "model calls only (load and waits on other jobs' texts excluded), summed over "
                         "the embed jobs that computed texts; useful FLOPs = unpadded tokens (cut at the "
                         "model's limit) x the encoder's layer shapes, attention at each text's length",
           "jobs": sum(1 for t in tallies if t.texts), "texts": texts,
           "tokens": sum(t.tokens for t in tallies), "seconds": round(seconds, 3), "threads": threads,
           # every job, those that found all their texts stored included: what else the stage cost
           "job_seconds": round(sum(t.job_seconds for t in tallies), 3),
           "load_seconds": round(sum(t.load_seconds for t in tallies), 3)}
    if not texts or seconds <= 0:
        return {**out, "projection": None, "why": "no embed job timed a text: every text was in the vector "
                                                  "store already, or the shards predate the tally"}
    out["texts_per_s"] = texts / seconds
    if any(t.shape is None for t in tallies if t.texts):
        return {**out, "projection": None, "why": "the model's config.json names no BERT layer shapes"}
    rate = sum(workload_flops(t.shape, t.tokens, t.squares) for t in tallies if t.texts) / seconds
    out["useful_gflops_per_s"] = rate / 1e9
    out["projection"] = {
        "what": f"bge-small-en-v1.5 ({BGE_SMALL['layers']} layers, hidden {BGE_SMALL['hidden']}) over "
                "LongMemEval_M's texts at this run's "
                f"useful FLOP/s, one embed job of {'/'.join(map(str, threads))} thread(s); jobs running "
                "at once divide it (an estimate: the rate depends on text lengths)",
        "workload": {"source": "a generated file of M's shape (projection.LONGMEMEVAL_M)",
                     **workload},
        "minutes": {g: workload_flops(BGE_SMALL, w["tokens"], w["squares"]) / rate / 60
                    for g, w in workload.items()}}
    return out
