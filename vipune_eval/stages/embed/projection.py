"""The embed stage's rate per provider, what its batching guarantees about the vectors' bytes,
and what the rate projects for bge-small on LongMemEval_M: the report's "Embed throughput".

Useful FLOPs count the tokens the model sees (cut at its limit, no padding: the batches hold texts
of one length; on a GPU the copies that fill a batch to its fixed shape are not counted) times a
BERT encoder's layer shapes, attention at each text's own length (``flops_per_token``). The embed
jobs' tallies (stages.embed.tally) give this run's useful FLOP/s per provider and device;
LongMemEval_M's texts per granularity (``LONGMEMEVAL_M``) turn it into minutes.
"""

from __future__ import annotations

from vipune_eval.core.embed_throughput import EmbedBlock, ProviderBlock
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


def reproducibility(provider: str, tallies: list[Tally]) -> str:
    """What the provider's batching guarantees about the bytes of a vector (stages.embed.provider)."""
    if provider == "cpu":
        return (
            "the same bytes whichever job embeds a text: onnxruntime's CPU kernels compute a row alike at "
            "any batch size"
        )
    computed = sum(t.tokens + t.filler_tokens for t in tallies)
    shape = (
        f"every call for a text length has one shape (budget // length rows; copies filling short "
        f"batches: {sum(t.filler_tokens for t in tallies) / max(computed, 1):.0%} of the tokens computed)"
    )
    probes = {t.rows_alike for t in tallies}
    if False in probes:
        return (
            f"{shape}, but a job's probe found a row computed differently by its place in such a batch: "
            "vectors can differ in their last bits between runs; embed.batch_tokens: 1 (one text per call) "
            "gives the same bytes every run, at a fraction of the speed"
        )
    if probes == {True}:
        return (
            f"{shape}, and each job's probe found a row computed alike wherever it sits in such a batch: "
            "the same bytes whichever job embeds a text, on this GPU model, budget and onnxruntime"
        )
    return f"{shape}; not probed (no job had two texts of one length)"


def summary(tallies: list[Tally], workload: dict[str, dict[str, int]]) -> EmbedBlock:
    """The run's embed jobs: totals, and per provider and device the rate, what it guarantees about
    the vectors' bytes and, from the rate, bge-small's time on LongMemEval_M per granularity;
    ``workload``: each granularity's texts of M (``LONGMEMEVAL_M``)."""
    computing = [t for t in tallies if t.texts]
    groups: dict[tuple[str, str], list[Tally]] = {}
    for t in computing:
        groups.setdefault((t.provider, t.device), []).append(t)
    out: EmbedBlock = {
        "definition": "model calls only (load and waits on other jobs' texts excluded), summed over "
        "the embed jobs that computed texts; useful FLOPs = unpadded tokens (cut at the "
        "model's limit) x the encoder's layer shapes, attention at each text's length",
        "jobs": len(computing),
        "texts": sum(t.texts for t in tallies),
        "tokens": sum(t.tokens for t in tallies),
        "seconds": round(sum(t.seconds for t in tallies), 3),
        # every job, those that found all their texts stored included: what else the stage cost
        "job_seconds": round(sum(t.job_seconds for t in tallies), 3),
        "load_seconds": round(sum(t.load_seconds for t in tallies), 3),
        "providers": [
            provider_summary(name, device, group, workload) for (name, device), group in sorted(groups.items())
        ],
    }
    if not out["providers"]:
        out["why"] = (
            "no embed job timed a text: every text was in the vector store already, or the shards predate the tally"
        )
    return out


def provider_summary(
    name: str, device: str, tallies: list[Tally], workload: dict[str, dict[str, int]]
) -> ProviderBlock:
    """One provider's (and device's) share of the embed jobs: see ``summary``."""
    texts, seconds = sum(t.texts for t in tallies), sum(t.seconds for t in tallies)
    threads = sorted({t.threads for t in tallies})
    out: ProviderBlock = {
        "provider": name,
        "device": device or "not recorded",
        "jobs": len(tallies),
        "texts": texts,
        "tokens": sum(t.tokens for t in tallies),
        "seconds": round(seconds, 3),
        "threads": threads,
        "batch_tokens": sorted({t.batch_tokens for t in tallies if t.batch_tokens}),
        "reproducibility": reproducibility(name, tallies),
        "projection": None,
    }
    if seconds <= 0:
        out["why"] = "the model calls took no measurable time"
        return out
    out["texts_per_s"] = texts / seconds
    if any(t.shape is None for t in tallies):
        out["why"] = "the model's config.json names no BERT layer shapes"
        return out
    rate = sum(workload_flops(t.shape, t.tokens, t.squares) for t in tallies if t.shape is not None) / seconds
    out["useful_gflops_per_s"] = rate / 1e9
    job = (
        f"one embed job of {'/'.join(map(str, threads))} thread(s) on {out['device']}; jobs running at once divide it"
        if name == "cpu"
        else f"one embed job on {out['device']} (CUDA)"
    )
    out["projection"] = {
        "what": f"bge-small-en-v1.5 ({BGE_SMALL['layers']} layers, hidden {BGE_SMALL['hidden']}) over "
        f"LongMemEval_M's texts at this run's useful FLOP/s, {job} (an estimate: the rate depends on "
        "text lengths)",
        "workload": {"source": "a generated file of M's shape (projection.LONGMEMEVAL_M)", **workload},
        "minutes": {g: workload_flops(BGE_SMALL, w["tokens"], w["squares"]) / rate / 60 for g, w in workload.items()},
    }
    return out
