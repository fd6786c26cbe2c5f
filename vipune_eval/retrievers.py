"""The registry of retrievers: which lane runs each one and what it is (one owner)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Retriever:
    name: str
    lane: str          # "vipune": the binary, per persona database; "reference": no binary
    description: str
    mirror: str | None = None  # the reference retriever that must agree with it


RETRIEVERS: tuple[Retriever, ...] = (
    Retriever("vipune", "vipune", "the vipune binary: search --hybrid --recency 0 --no-touch",
              mirror="hybrid"),
    Retriever("vipune-semantic", "vipune",
              "the vipune binary on the same database: search --no-hybrid (its dense arm alone)",
              mirror="dense"),
    Retriever("dense", "reference", "cosine over the cached vectors, vipune's semantic arm"),
    Retriever("bm25", "reference", "SQLite FTS5 bm25 with vipune's AND-of-every-word query"),
    Retriever("bm25-or", "reference", "SQLite FTS5 bm25 with an OR of the words"),
    Retriever("hybrid", "reference", "RRF (k = 25) of dense and bm25: vipune's hybrid algorithm"),
    Retriever("hybrid-or", "reference", "RRF (k = 25) of dense and bm25-or"),
)
BY_NAME = {r.name: r for r in RETRIEVERS}
NAMES = tuple(BY_NAME)
REFERENCE = tuple(r.name for r in RETRIEVERS if r.lane == "reference")
VIPUNE = tuple(r.name for r in RETRIEVERS if r.lane == "vipune")
DEFAULT = NAMES


def reference(configured: list[str]) -> list[str]:
    return [name for name in configured if BY_NAME[name].lane == "reference"]


def uses_binary(configured: list[str]) -> bool:
    return any(BY_NAME[name].lane == "vipune" for name in configured)
