"""core/embed_throughput.py: report.json's ``embed`` has the keys its shape declares, as the
projection writes it: a timed provider with its projection, one without a rate, and a run whose
every text was stored already (a TypedDict is not checked when report.json is read back)."""

from __future__ import annotations

from vipune_eval.core.embed_throughput import EmbedBlock, Projection, ProviderBlock
from vipune_eval.stages.embed.projection import LONGMEMEVAL_M, summary
from vipune_eval.stages.embed.tally import Tally

SHAPE = {"layers": 2, "hidden": 8, "intermediate": 16}


def declared(shape: type, found: dict) -> bool:
    return shape.__required_keys__ <= set(found) <= set(shape.__annotations__)


def test_the_projection_writes_the_declared_keys():
    timed = Tally(texts=2, tokens=5, squares=13, seconds=1.5, threads=2, shape=SHAPE)
    untimed = Tally(texts=1, tokens=3, squares=9, threads=1, provider="cuda", device="a GPU", rows_alike=True)
    block = summary([timed, untimed], LONGMEMEVAL_M)
    assert declared(EmbedBlock, block) and "why" not in block
    cpu, cuda = block["providers"]
    assert declared(ProviderBlock, cpu) and declared(Projection, cpu["projection"])
    assert declared(ProviderBlock, cuda) and cuda["projection"] is None and cuda["why"]
    stored = summary([Tally(threads=1)], LONGMEMEVAL_M)
    assert declared(EmbedBlock, stored) and stored["providers"] == [] and stored["why"]
