"""The embed jobs' own tallies, the useful FLOP/s they give and the projection for bge-small on M."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from support.tinymodel import build_tiny_model
from vipune_eval.core.io import text_id
from vipune_eval.core.model_files import ModelFiles
from vipune_eval.registry.granularities import NAMES
from vipune_eval.stages.embed import projection
from vipune_eval.stages.embed.embed import run_embed
from vipune_eval.stages.embed.projection import LONGMEMEVAL_M, flops_per_token, summary, workload_flops
from vipune_eval.stages.embed.tally import Tally, encoder_shape, read_tallies
from vipune_eval.stages.filter.rows import TEXTS_SCHEMA
from vipune_eval.stages.report.markdown import section
from vipune_eval.stages.report.sections.throughput import embed_section

TINY_BERT = {"layers": 1, "hidden": 2, "intermediate": 4}


def test_flops_by_hand():
    # per token: 1 x 2 x (4 x 2^2 + 2 x 2 x 4) = 64, plus 4 x seq x 2 for attention
    assert flops_per_token(**TINY_BERT, seq=3) == 64 + 24
    # texts of 2 and 3 tokens: 2 x (64 + 16) + 3 x (64 + 24) = 424 = 64 x 5 + 8 x (4 + 9)
    assert workload_flops(TINY_BERT, tokens=5, squares=13) == 424
    assert workload_flops(TINY_BERT, 5, 13) == sum(n * flops_per_token(**TINY_BERT, seq=n) for n in (2, 3))


def test_tally_times_calls_and_counts_the_lengths_the_model_saw():
    tally = Tally(threads=2)
    with tally.timed(np.array([2, 3])):
        pass
    with tally.timed(np.array([4])):
        pass
    assert (tally.texts, tally.tokens, tally.squares) == (3, 9, 4 + 9 + 16)
    assert tally.seconds > 0


def test_summary_rate_and_projection_by_hand(monkeypatch):
    monkeypatch.setattr(projection, "BGE_SMALL", TINY_BERT)
    jobs = [
        Tally(texts=2, tokens=5, squares=13, seconds=1.5, threads=2, shape=TINY_BERT),
        Tally(texts=1, tokens=3, squares=9, seconds=0.5, threads=2, shape=TINY_BERT),
        Tally(threads=2, shape=TINY_BERT),
    ]  # a job whose texts were all in the store
    out = summary(jobs, {"session": {"texts": 1, "tokens": 10, "squares": 100}})
    rate = (424 + 3 * (64 + 24)) / 2.0  # FLOPs over the seconds of both computing jobs
    assert out["jobs"] == 2 and out["texts"] == 3
    (cpu,) = out["providers"]
    assert cpu["provider"] == "cpu" and cpu["jobs"] == 2 and cpu["texts_per_s"] == 1.5
    assert cpu["useful_gflops_per_s"] == pytest.approx(rate / 1e9)
    assert cpu["projection"]["minutes"]["session"] == pytest.approx((64 * 10 + 8 * 100) / rate / 60)


def test_no_projection_without_layer_shapes_or_without_computed_texts():
    (cpu,) = summary([Tally(texts=1, tokens=5, squares=25, seconds=1.0, threads=1)], LONGMEMEVAL_M)["providers"]
    assert cpu["projection"] is None and "config.json" in cpu["why"]
    nothing = summary([Tally(threads=1)], LONGMEMEVAL_M)
    assert nothing["providers"] == [] and "vector store" in nothing["why"]
    assert "every text was in the vector store" in section(embed_section({"embed": nothing}))


def test_each_provider_has_its_rate_its_reproducibility_and_its_projection(monkeypatch):
    """Issue 33: a run embedded partly on the CPU and partly on a GPU (two machines, one store
    root) reports each apart, names the device, and says what each guarantees about the bytes."""
    monkeypatch.setattr(projection, "BGE_SMALL", TINY_BERT)
    cpu = Tally(
        texts=2,
        tokens=5,
        squares=13,
        seconds=2.0,
        threads=2,
        shape=TINY_BERT,
        provider="cpu",
        device="Intel Xeon",
        batch_tokens=512,
    )
    gpu = Tally(
        texts=3,
        tokens=9,
        squares=27,
        seconds=0.5,
        threads=2,
        shape=TINY_BERT,
        provider="cuda",
        device="NVIDIA H200",
        batch_tokens=16384,
        filler_tokens=3,
        rows_alike=True,
    )
    out = summary([cpu, gpu], {"session": {"texts": 1, "tokens": 10, "squares": 100}})
    by = {p["provider"]: p for p in out["providers"]}
    assert by["cpu"]["device"] == "Intel Xeon" and by["cuda"]["device"] == "NVIDIA H200"
    assert by["cpu"]["texts_per_s"] == 1.0 and by["cuda"]["texts_per_s"] == 6.0
    assert by["cuda"]["useful_gflops_per_s"] == pytest.approx(workload_flops(TINY_BERT, 9, 27) / 0.5 / 1e9)
    assert by["cuda"]["projection"]["minutes"]["session"] < by["cpu"]["projection"]["minutes"]["session"]
    assert "any batch size" in by["cpu"]["reproducibility"]
    assert "25% of the tokens computed" in by["cuda"]["reproducibility"]  # 3 filler of 12 computed
    assert "the same bytes whichever job" in by["cuda"]["reproducibility"]
    text = section(embed_section({"embed": out}))
    assert "**CPU** (Intel Xeon)" in text and "**CUDA** (NVIDIA H200)" in text
    assert "batches of at most 16384 tokens: 6.0 texts/s" in text and "on NVIDIA H200 (CUDA)" in text
    for probe, words in ((False, "can differ in their last bits"), (None, "not probed")):
        gpu.rows_alike = probe
        assert words in summary([gpu], LONGMEMEVAL_M)["providers"][0]["reproducibility"]


def test_encoder_shape_reads_config_json(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"num_hidden_layers": 12, "hidden_size": 384, "intermediate_size": 1536})
    )
    assert encoder_shape(tmp_path) == projection.BGE_SMALL
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 384}))
    assert encoder_shape(tmp_path) is None


def test_every_granularity_has_its_m_workload():
    assert set(LONGMEMEVAL_M) == set(NAMES)
    for g, w in LONGMEMEVAL_M.items():
        assert w["texts"] > 0 and w["tokens"] <= 512 * w["texts"], g
        assert w["tokens"] ** 2 / w["texts"] <= w["squares"] <= 512 * w["tokens"], g  # Cauchy-Schwarz, cap


def test_embed_shards_carry_the_jobs_tally(tmp_path):
    model = build_tiny_model(tmp_path / "model")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, **{"num_hidden_layers": 1, "intermediate_size": 4}}))
    texts = [f"zebra {'violin ' * n}" for n in range(1, 9)]
    path = tmp_path / "texts.parquet"
    pq.write_table(pa.Table.from_pylist([{"text_id": text_id(t), "text": t} for t in texts], schema=TEXTS_SCHEMA), path)
    fingerprint = tmp_path / "fp.json"
    fingerprint.write_text("{}")
    files = ModelFiles(model, "model.onnx", "mean")

    def run(out):
        return run_embed(
            path, files, 0, 1, out, threads=1, batch_tokens=64, model_fingerprint=fingerprint, store=tmp_path / "store"
        )

    assert run(tmp_path / "first.parquet") == len(texts)
    (tally,) = read_tallies([tmp_path / "first.parquet"])
    assert tally.texts == len(texts) and tally.tokens == sum(1 + n + 2 for n in range(1, 9))
    assert tally.shape == {"layers": 1, "hidden": 384, "intermediate": 4} and tally.threads == 1
    assert 0 < tally.load_seconds and 0 < tally.seconds and tally.load_seconds + tally.seconds < tally.job_seconds
    assert summary([tally], LONGMEMEVAL_M)["providers"][0]["useful_gflops_per_s"] > 0
    assert run(tmp_path / "again.parquet") == 0  # every text in the store: nothing computed, nothing timed
    (again,) = read_tallies([tmp_path / "again.parquet"])
    assert again.texts == 0 and again.load_seconds == 0 and again.job_seconds > 0  # no model loaded
    assert summary([again], LONGMEMEVAL_M)["providers"] == []
