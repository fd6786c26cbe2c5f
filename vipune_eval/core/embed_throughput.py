"""The embed stage's throughput as report.json holds it (its ``embed``): the embed jobs' tallies
summed, per provider and device their rate, what their batching guarantees about the vectors'
bytes, and what the rate projects for LongMemEval_M.

Its shape, shared by its writer (stages.embed.projection.summary, which the report runs) and the
report's sections: here, not in the writer, so that an edit of the projection's text reruns the
report alone, not the commands that only read the shape.
"""

from __future__ import annotations

from typing import Any, TypedDict


class Projection(TypedDict):
    what: str
    workload: dict[str, Any]  # ``source`` and each granularity's texts, tokens and squares
    minutes: dict[str, float]  # granularity → bge-small's minutes on LongMemEval_M at this rate


class _ProviderBlock(TypedDict):
    provider: str  # cpu, cuda
    device: str
    jobs: int
    texts: int
    tokens: int
    seconds: float
    threads: list[int]
    batch_tokens: list[int]
    reproducibility: str  # what its batching guarantees about a vector's bytes
    projection: Projection | None


class ProviderBlock(_ProviderBlock, total=False):
    """One provider and device's share of the embed jobs (stages.embed.projection.provider_summary)."""

    texts_per_s: float
    useful_gflops_per_s: float
    why: str  # why there is no projection


class _EmbedBlock(TypedDict):
    definition: str
    jobs: int
    texts: int
    tokens: int
    seconds: float
    job_seconds: float
    load_seconds: float
    providers: list[ProviderBlock]


class EmbedBlock(_EmbedBlock, total=False):
    """report.json's ``embed``: the embed jobs' own tally (stages.embed.projection.summary)."""

    why: str  # why no provider timed a text
