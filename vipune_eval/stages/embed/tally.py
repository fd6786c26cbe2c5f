"""What an embed job computed and how long it took: its tally, written into its shard's Parquet
metadata (the report adds the tallies up and projects from them: stages.embed.projection).

Each embed job times its own model calls (not the loading, nor the waits on texts another job
claimed), the texts' lengths as the model saw them, and the encoder's layer shapes from the
model's config.json.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

COMPUTE_KEY = b"vipune_eval.embed_compute"


def encoder_shape(model_dir: Path) -> dict[str, int] | None:
    """A BERT encoder's layer shapes from its config.json; None when it names none."""
    try:
        c = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        return {
            "layers": int(c["num_hidden_layers"]),
            "hidden": int(c["hidden_size"]),
            "intermediate": int(c["intermediate_size"]),
        }
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
    provider: str = "cpu"  # where the model ran (stages.embed.provider): "cpu" or "cuda"
    device: str = ""  # the CPU's or GPU's name
    batch_tokens: int = 0  # the token budget of a model call
    filler_tokens: int = 0  # tokens of the copies that fill batches up to their fixed shape (CUDA)
    rows_alike: bool | None = None  # the fixed-shape probe's answer (CUDA; embed.rows_alike)

    @contextlib.contextmanager
    def loading(self) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.load_seconds += time.perf_counter() - start

    @contextlib.contextmanager
    def timed(self, lengths: np.ndarray, filler: int = 0) -> Iterator[None]:
        """Time one model call over texts of ``lengths`` tokens and ``filler`` copies of one of them."""
        start = time.perf_counter()
        yield
        self.seconds += time.perf_counter() - start
        self.filler_tokens += filler * int(lengths[0]) if filler else 0
        self.texts += len(lengths)
        self.tokens += int(lengths.sum())
        self.squares += int((lengths.astype(np.int64) ** 2).sum())

    def metadata(self) -> dict[bytes, bytes]:
        return {COMPUTE_KEY: json.dumps(asdict(self), allow_nan=False).encode()}


def read_tallies(paths: Sequence[str | Path]) -> list[Tally]:
    """The tallies embed jobs wrote into their shards (shards without one are skipped)."""
    out = []
    for path in paths:
        meta = pq.read_schema(path).metadata or {}
        if COMPUTE_KEY in meta:
            out.append(Tally(**json.loads(meta[COMPUTE_KEY])))
    return out
