"""What the embed jobs computed, how fast, and what that rate projects for bge-small on
LongMemEval_M (each granularity's texts of M: ``granularities``).

Each embed job times its own model calls (not the loading, nor the waits on texts another job
claimed) and writes the tally into its shard's Parquet metadata; the report adds the tallies up.
Useful FLOPs count the tokens the model sees (cut at its limit, no padding: the batches hold texts
of one length) times a BERT encoder's layer shapes from the model's config.json, attention at
each text's own length (``flops_per_token``).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

COMPUTE_KEY = b"vipune_eval.embed_compute"
BGE_SMALL = {"layers": 12, "hidden": 384, "intermediate": 1536}  # BAAI/bge-small-en-v1.5's config.json


def flops_per_token(layers: int, hidden: int, intermediate: int, seq) -> float:
    """Forward FLOPs per token of a BERT encoder at sequence length ``seq``: 2 x the matmul
    parameters (Q, K, V, output: 4h^2; FFN: 2hi) plus attention scores and context (2 seq h
    each). Embeddings, layer norms, softmax and GELU are left out."""
    return layers * (2 * (4 * hidden * hidden + 2 * hidden * intermediate) + 4 * seq * hidden)


def workload_flops(shape: dict[str, int], tokens: float, squares: float) -> float:
    """FLOPs of texts whose lengths sum to ``tokens`` and whose squared lengths to ``squares``."""
    return flops_per_token(**shape, seq=0) * tokens + 4 * shape["layers"] * shape["hidden"] * squares


def encoder_shape(model_dir: Path) -> dict[str, int] | None:
    """A BERT encoder's layer shapes from its config.json; None when it names none."""
    try:
        c = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        return {"layers": int(c["num_hidden_layers"]), "hidden": int(c["hidden_size"]),
                "intermediate": int(c["intermediate_size"])}
    except (OSError, KeyError, TypeError, ValueError):
        return None


@dataclass
class Tally:
    """Model calls of one embed job: texts, their lengths as the model saw them, seconds."""

    texts: int = 0
    tokens: int = 0
    squares: int = 0
    seconds: float = 0.0
    threads: int = 0
    shape: dict[str, int] | None = None  # the encoder's layer shapes (encoder_shape)
    load_seconds: float = 0.0  # loading the model
    job_seconds: float = 0.0  # the job from reading its texts to having every vector it writes

    @contextlib.contextmanager
    def loading(self) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.load_seconds += time.perf_counter() - start

    @contextlib.contextmanager
    def timed(self, lengths: np.ndarray) -> Iterator[None]:
        """Time one model call over texts of ``lengths`` tokens."""
        start = time.perf_counter()
        yield
        self.seconds += time.perf_counter() - start
        self.texts += len(lengths)
        self.tokens += int(lengths.sum())
        self.squares += int((lengths.astype(np.int64) ** 2).sum())

    def metadata(self) -> dict[bytes, bytes]:
        return {COMPUTE_KEY: json.dumps(asdict(self)).encode()}


def read_tallies(paths: list[Path]) -> list[Tally]:
    """The tallies embed jobs wrote into their shards (shards without one are skipped)."""
    out = []
    for path in paths:
        meta = pq.read_schema(path).metadata or {}
        if COMPUTE_KEY in meta:
            out.append(Tally(**json.loads(meta[COMPUTE_KEY])))
    return out


def summary(tallies: list[Tally], workload: dict[str, dict[str, int]]) -> dict:
    """The run's embed rate and, from it, bge-small's time on LongMemEval_M per granularity;
    ``workload``: each granularity's texts of M (``granularities.LONGMEMEVAL_M``)."""
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
        "workload": {"source": "a generated file of M's shape (granularities.LONGMEMEVAL_M)",
                     **workload},
        "minutes": {g: workload_flops(BGE_SMALL, w["tokens"], w["squares"]) / rate / 60
                    for g, w in workload.items()}}
    return out
