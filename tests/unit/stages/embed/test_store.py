"""Issue 23: token-budget batches, the vector store shared by every view, embed.cuda. Issue 33: the
budget per provider, fixed batch shapes on a GPU (tested on a shape-sensitive stand-in,
support.fakegpu), the store kept apart per provider. Issue 32: a damaged part is repaired."""

import json
import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from support.fakegpu import ShapeSensitiveGPU
from support.synthetic import VOCABULARY
from support.tinymodel import build_tiny_model
from vipune_eval.cli import stage_call
from vipune_eval.core.io import text_id
from vipune_eval.core.model_files import ModelFiles
from vipune_eval.core.tokens import count_tokens
from vipune_eval.errors import EvalError
from vipune_eval.stages.embed import embed as embed_stage
from vipune_eval.stages.embed import provider as providers
from vipune_eval.stages.embed.embed import (
    RECIPE_VERSION,
    call_texts,
    load_model,
    model_hash,
    rows_alike,
    run_embed,
    token_batches,
)
from vipune_eval.stages.embed.provider import AUTO_BUDGET, Provider, batch_rows
from vipune_eval.stages.embed.store import VectorStore
from vipune_eval.stages.embed.tally import read_tallies
from vipune_eval.stages.filter.rows import TEXTS_SCHEMA

os.environ["HF_HUB_OFFLINE"] = "1"
FILE = "onnx/model.onnx"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("model"), onnx_name=FILE, attention=True)  # tokens interact


def texts_of(n, seed=0):
    rng = np.random.default_rng(seed)
    words = list(VOCABULARY[10:300])
    return [" ".join(rng.choice(words, size=int(rng.integers(1, 40)))) for _ in range(n)]


def write_texts(path, texts):
    pq.write_table(
        pa.Table.from_pylist([{"text_id": text_id(t), "text": t} for t in dict.fromkeys(texts)], schema=TEXTS_SCHEMA),
        path,
    )
    return path


def fingerprint(folder):
    path = folder / "model-fingerprint.json"
    path.write_text('{"kind": "model", "files": {"onnx/model.onnx": "abc"}}')
    return path


def vectors_of(out):
    table = pq.read_table(out)
    matrix = np.asarray(table.column("embedding").combine_chunks().values).reshape(table.num_rows, -1)
    return dict(zip(table.column("text_id").to_pylist(), matrix))


def test_token_batches_hold_one_length_within_the_budget():
    lengths = np.array([5, 9, 5, 5, 700, 9, 5, 3, 700])
    batches = token_batches(lengths, budget=12)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(set(lengths[batch])) == 1  # no padded position
        assert len(batch) == 1 or lengths[batch].sum() <= 12
    assert [int(lengths[b[0]]) for b in batches] == sorted(int(lengths[b[0]]) for b in batches)
    assert [len(b) for b in batches if lengths[b[0]] == 5] == [2, 2]


def test_batched_vectors_equal_one_at_a_time_and_keep_the_texts_order(model_dir, tmp_path):
    texts = texts_of(40)
    path = write_texts(tmp_path / "texts.parquet", texts)
    out = tmp_path / "e.parquet"
    run_embed(path, ModelFiles(model_dir, FILE, "mean"), 0, 1, out, 1, 256, fingerprint(tmp_path), tmp_path / "store")
    table = pq.read_table(out)
    assert table.column("text_id").to_pylist() == pq.read_table(path).column("text_id").to_pylist()
    model = load_model(model_dir, FILE, "mean", threads=1)
    got = vectors_of(out)
    for text in dict.fromkeys(texts):
        alone = next(iter(model.embed([text], batch_size=1)))
        assert np.abs(got[text_id(text)] - alone).max() <= 1e-6
        assert np.array_equal(got[text_id(text)], alone)  # bit for bit, as the store relies on


def test_a_stored_vector_does_not_depend_on_the_job_order_or_the_budget(model_dir, tmp_path):
    texts = texts_of(60, seed=1)
    a = write_texts(tmp_path / "a.parquet", texts[:40])
    b = write_texts(tmp_path / "b.parquet", texts[20:])
    fp = fingerprint(tmp_path)
    results = {}
    for order, budget in (("ab", 64), ("ba", 4096)):
        store = tmp_path / f"store-{order}"
        for view in order:
            run_embed(
                {"a": a, "b": b}[view],
                ModelFiles(model_dir, FILE, "mean"),
                0,
                1,
                tmp_path / f"{order}-{view}.parquet",
                1,
                budget,
                fp,
                store,
            )
        results[order] = {**vectors_of(tmp_path / f"{order}-a.parquet"), **vectors_of(tmp_path / f"{order}-b.parquet")}
    assert results["ab"].keys() == results["ba"].keys()
    for tid in results["ab"]:
        assert results["ab"][tid].tobytes() == results["ba"][tid].tobytes()


JOB = """
import sys
from pathlib import Path
from vipune_eval.core.model_files import ModelFiles
from vipune_eval.stages.embed.embed import run_embed
texts, model, fp, store, out = map(Path, sys.argv[1:6])
print(run_embed(texts, ModelFiles(model, "onnx/model.onnx", "mean"), 0, 1, out, 1, 64, fp, store))
"""


def test_two_concurrent_jobs_embed_each_text_once(model_dir, tmp_path):
    texts = texts_of(400, seed=2)
    views = [write_texts(tmp_path / f"{v}.parquet", texts[i : i + 300]) for v, i in (("a", 0), ("b", 100))]
    fp, store = fingerprint(tmp_path), tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    jobs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                JOB,
                str(view),
                str(model_dir),
                str(fp),
                str(store),
                str(tmp_path / f"out-{n}.parquet"),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n, view in enumerate(views)
    ]
    computed = [int(job.communicate(timeout=300)[0].split()[-1]) for job in jobs]
    assert all(job.returncode == 0 for job in jobs)
    assert sum(computed) == len(set(texts))  # one computation per unique text
    stored = pq.read_table(store / f"{model_hash(fp)}-r{RECIPE_VERSION}" / "parts").column("text_id").to_pylist()
    assert len(stored) == len(set(stored)) == len(set(texts))
    first, second = vectors_of(tmp_path / "out-0.parquet"), vectors_of(tmp_path / "out-1.parquet")
    for tid in first.keys() & second.keys():
        assert first[tid].tobytes() == second[tid].tobytes()


def test_a_job_waits_for_texts_a_live_job_claimed_and_reclaims_a_dead_jobs(model_dir, tmp_path):
    texts = texts_of(30, seed=3)
    path = write_texts(tmp_path / "texts.parquet", texts)
    ids = pq.read_table(path).column("text_id").to_pylist()
    fp, root = fingerprint(tmp_path), tmp_path / "store"
    other = VectorStore(root, f"{model_hash(fp)}-r{RECIPE_VERSION}", 384)
    mine, stored, _ = other.claim(set(ids[:10]))  # a concurrent job is embedding these
    assert mine == set(ids[:10]) and not stored
    result = {}
    job = threading.Thread(
        target=lambda: result.update(
            n=run_embed(path, ModelFiles(model_dir, FILE, "mean"), 0, 1, tmp_path / "out.parquet", 1, 64, fp, root)
        )
    )
    job.start()
    time.sleep(1.0)
    assert job.is_alive()  # waiting for the other job's texts, not embedding them
    model = load_model(model_dir, FILE, "mean", threads=1)
    claimed = sorted(mine)
    by_id = dict(zip(ids, pq.read_table(path).column("text").to_pylist()))
    other.put(claimed, np.stack(list(model.embed([by_id[t] for t in claimed]))), np.zeros(len(claimed)))
    other.release()
    job.join(timeout=120)
    assert result["n"] == len(ids) - 10

    # A claim whose job died (no lock held) lapses: its texts are embedded by the next job.
    dead = root / f"{model_hash(fp)}-r{RECIPE_VERSION}" / "claims" / "dead-job.json"
    texts2 = texts_of(12, seed=4)
    path2 = write_texts(tmp_path / "texts2.parquet", texts2)
    dead.write_text(json.dumps(pq.read_table(path2).column("text_id").to_pylist()))
    assert run_embed(
        path2, ModelFiles(model_dir, FILE, "mean"), 0, 1, tmp_path / "out2.parquet", 1, 64, fp, root
    ) == len(set(texts2))
    assert not dead.exists()


def test_cuda_missing_is_a_named_error_not_a_cpu_run(model_dir, monkeypatch):
    import onnxruntime

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    with pytest.raises(EvalError, match=r"embed.cuda is set.*onnxruntime-gpu.*embed.cuda: false"):
        load_model(model_dir, FILE, "mean", threads=1, cuda=True)
    assert load_model(model_dir, FILE, "mean", threads=1, cuda=False) is not None


@pytest.mark.parametrize("active", [["CUDAExecutionProvider", "CPUExecutionProvider"], ["CPUExecutionProvider"]])
def test_cuda_is_asked_for_and_a_session_without_it_is_refused(model_dir, monkeypatch, active):
    import fastembed
    import onnxruntime

    asked = {}

    class Recording(fastembed.TextEmbedding):
        def __init__(self, name, **kwargs):
            asked.update(kwargs)
            self.model = SimpleNamespace(model=SimpleNamespace(get_providers=lambda: active))

    monkeypatch.setattr(
        onnxruntime, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    monkeypatch.setattr(fastembed, "TextEmbedding", Recording)
    if "CUDAExecutionProvider" in active:
        assert isinstance(load_model(model_dir, FILE, "mean", threads=1, cuda=True), Recording)
    else:  # fastembed only warns when CUDA did not come up: the harness refuses
        with pytest.raises(EvalError, match="session runs on CPUExecutionProvider, not on CUDA"):
            load_model(model_dir, FILE, "mean", threads=1, cuda=True)
    assert asked["providers"][0] == "CUDAExecutionProvider"


def damaged(data: bytes, damage: str) -> bytes:
    if damage == "truncated":
        return data[: len(data) // 2]
    if damage == "empty":
        return b""
    flipped = bytearray(data)  # one bit in the vectors' pages, the footer intact
    flipped[len(data) // 2] ^= 0x10
    return bytes(flipped)


@pytest.mark.parametrize("damage", ["truncated", "empty", "flipped"])
def test_a_damaged_part_is_set_aside_named_and_its_texts_embedded_again(model_dir, tmp_path, caplog, damage):
    """Issue 32, item 3: a part cut short (a crash before its bytes reached the disk, a full disk,
    a partial copy) stopped every later embed job with pyarrow's ArrowInvalid, for ever; a flipped
    bit was served as a vector."""
    texts = texts_of(30, seed=5)
    path = write_texts(tmp_path / "texts.parquet", texts)
    fp, root = fingerprint(tmp_path), tmp_path / "store"
    files = ModelFiles(model_dir, FILE, "mean")
    assert run_embed(path, files, 0, 1, tmp_path / "first.parquet", 1, 64, fp, root) == len(set(texts))
    parts = root / f"{model_hash(fp)}-r{RECIPE_VERSION}" / "parts"
    (part,) = parts.glob("*.parquet")
    data = part.read_bytes()
    part.write_bytes(damaged(data, damage))
    with caplog.at_level("WARNING", logger="vipune_eval"):
        again = run_embed(path, files, 0, 1, tmp_path / "again.parquet", 1, 64, fp, root)
    assert again == len(set(texts))  # the part's texts are embedded again
    assert any(part.name in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
    assert (parts.parent / "damaged" / part.name).exists() and not part.exists()  # set aside, kept to look at
    first, second = vectors_of(tmp_path / "first.parquet"), vectors_of(tmp_path / "again.parquet")
    assert first.keys() == second.keys()
    assert all(first[t].tobytes() == second[t].tobytes() for t in first)
    assert run_embed(path, files, 0, 1, tmp_path / "third.parquet", 1, 64, fp, root) == 0  # repaired for good


# ---------------------------------------------------------------- issue 33: the provider, a GPU


def test_auto_is_each_providers_measured_best_and_a_number_wins():
    cpu, gpu = Provider("cpu", "a CPU"), Provider("cuda", "NVIDIA H200")
    assert cpu.budget("auto")[0] == AUTO_BUDGET["cpu"] == 512
    assert gpu.budget("auto")[0] == AUTO_BUDGET["cuda"] == 16384
    assert cpu.budget(2048) == gpu.budget(2048) == (2048, "set in the config")
    assert not cpu.fixed_shapes and gpu.fixed_shapes


def test_the_cli_takes_auto_or_a_positive_number():
    def parsed(value):
        return stage_call(
            [
                "embed",
                "--texts",
                "t",
                "--out",
                "o",
                "--model-dir",
                "m",
                "--file",
                "f",
                "--pooling",
                "mean",
                "--shard",
                "0",
                "--shards",
                "1",
                "--model-fingerprint",
                "fp",
                "--store",
                "s",
                "--threads",
                "1",
                "--batch-tokens",
                value,
            ]
        )[2]["batch_tokens"]

    assert parsed("auto") == "auto" and parsed("4096") == 4096
    for bad in ("0", "-5", "big"):
        with pytest.raises(SystemExit):
            parsed(bad)


def test_the_embed_job_logs_and_records_the_budget_it_used(model_dir, tmp_path, caplog):
    path = write_texts(tmp_path / "texts.parquet", texts_of(10, seed=6))
    files, fp = ModelFiles(model_dir, FILE, "mean"), fingerprint(tmp_path)
    for budget, expected, source in (("auto", 512, "auto: the measured best on CPU"), (64, 64, "set in the config")):
        caplog.clear()
        with caplog.at_level("INFO", logger="vipune_eval"):
            run_embed(path, files, 0, 1, tmp_path / f"{budget}.parquet", 1, budget, fp, tmp_path / "store")
        assert (
            f"on CPU ({providers.cpu_name()}), 1 threads, batches of at most {expected} tokens ({source})"
            in caplog.text
        )
        (tally,) = read_tallies([tmp_path / f"{budget}.parquet"])
        assert (tally.provider, tally.device, tally.batch_tokens) == ("cpu", providers.cpu_name(), expected)


def use_fake_gpu(monkeypatch, by_position=False, device="NVIDIA Fake GPU"):
    """run_embed with embed.cuda on the shape-sensitive stand-in; the loaded doubles are listed."""
    import onnxruntime

    monkeypatch.setattr(
        onnxruntime, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    monkeypatch.setattr(providers, "cuda_device_name", lambda device_id=0: device)
    real, loaded = embed_stage.load_model, []

    def load(model_dir, file, pooling, threads, cuda=False):
        assert cuda, "the job asked for the CPU"
        loaded.append(ShapeSensitiveGPU(real(model_dir, file, pooling, threads), by_position))
        return loaded[-1]

    monkeypatch.setattr(embed_stage, "load_model", load)
    return loaded


def schedulings(model_dir, tmp_path, budget=64):
    """The same texts embedded four ways: one job; three shard jobs in the order 2, 0, 1; two
    overlapping views, a then b, and b then a; each into a fresh store. Their vectors by text id."""
    texts = texts_of(80, seed=7)
    tmp_path.mkdir(parents=True, exist_ok=True)
    views = {
        "a": write_texts(tmp_path / "a.parquet", texts[:55]),
        "b": write_texts(tmp_path / "b.parquet", texts[25:]),
        "all": write_texts(tmp_path / "all.parquet", texts),
    }
    files, fp = ModelFiles(model_dir, FILE, "mean"), fingerprint(tmp_path)
    plans = {
        "one job": [("all", 0, 1)],
        "3 shards, 2-0-1": [("all", 2, 3), ("all", 0, 3), ("all", 1, 3)],
        "views a, b": [("a", 0, 1), ("b", 0, 1)],
        "views b, a": [("b", 0, 1), ("a", 0, 1)],
    }
    out = {}
    for name, jobs in plans.items():
        out[name] = {}
        for n, (view, shard, shards) in enumerate(jobs):
            dest = tmp_path / name / f"{n}.parquet"
            run_embed(views[view], files, shard, shards, dest, 1, budget, fp, tmp_path / name / "store", cuda=True)
            out[name].update(vectors_of(dest))
    return texts, out


def test_on_a_gpu_every_call_for_a_length_has_one_shape_whatever_the_claims(model_dir, tmp_path, monkeypatch):
    loaded = use_fake_gpu(monkeypatch)
    texts, _ = schedulings(model_dir, tmp_path)
    tokens = dict(zip(texts, count_tokens(model_dir, texts)))
    calls = [call for gpu in loaded for call in gpu.calls]  # a job's probe included
    assert {t for call in calls for t in call} == set(texts)
    for call in calls:
        assert len({tokens[t] for t in call}) == 1  # one token length per call, nothing padded
        assert len(call) == batch_rows(tokens[call[0]], 64)  # the full shape, even a job's last batch


def test_on_a_shape_sensitive_gpu_the_vectors_are_the_same_whatever_the_scheduling(model_dir, tmp_path, monkeypatch):
    use_fake_gpu(monkeypatch)
    _, runs = schedulings(model_dir, tmp_path / "fixed")
    first = runs["one job"]
    for name, vectors in runs.items():
        assert vectors.keys() == first.keys(), name
        assert all(vectors[t].tobytes() == first[t].tobytes() for t in first), name
    # The control: the CPU's batching (a short last batch) on the same stand-in gives other bytes.
    monkeypatch.setattr(Provider, "fixed_shapes", property(lambda self: False))
    _, runs = schedulings(model_dir, tmp_path / "cpu-rule")
    assert any(runs["3 shards, 2-0-1"][t].tobytes() != runs["one job"][t].tobytes() for t in runs["one job"])


def test_fillers_complete_the_shape_and_are_dropped():
    assert call_texts(["a", "b"], 10, 64, fixed_shapes=True) == ["a", "b", "a", "a", "a", "a"]
    assert call_texts(["a", "b"], 10, 64, fixed_shapes=False) == ["a", "b"]
    assert call_texts(["x"], 700, 64, fixed_shapes=True) == ["x"]  # longer than the budget: alone


def test_the_probe_tells_a_gpu_whose_rows_depend_on_their_place(model_dir):
    cpu = load_model(model_dir, FILE, "mean", threads=1)
    texts = texts_of(12, seed=8)
    lengths = np.full(len(texts), 9)  # as if of one length: the stand-in does not look
    assert rows_alike(ShapeSensitiveGPU(cpu), texts, lengths, 64) is True
    assert rows_alike(ShapeSensitiveGPU(cpu, by_position=True), texts, lengths, 64) is False
    assert rows_alike(ShapeSensitiveGPU(cpu), texts[:3], np.array([4, 5, 6]), 64) is None  # no shared length
    assert rows_alike(ShapeSensitiveGPU(cpu), texts, lengths, 9) is None  # one text per call


@pytest.mark.parametrize("by_position", [False, True])
def test_a_gpu_job_records_and_says_what_its_probe_found(model_dir, tmp_path, monkeypatch, caplog, by_position):
    use_fake_gpu(monkeypatch, by_position=by_position)
    path = write_texts(tmp_path / "texts.parquet", [" ".join(["violin"] * 3 + [w]) for w in VOCABULARY[20:40]])
    with caplog.at_level("INFO", logger="vipune_eval"):
        run_embed(
            path,
            ModelFiles(model_dir, FILE, "mean"),
            0,
            1,
            tmp_path / "out.parquet",
            1,
            "auto",
            fingerprint(tmp_path),
            tmp_path / "store",
            cuda=True,
        )
    (tally,) = read_tallies([tmp_path / "out.parquet"])
    assert (tally.provider, tally.device, tally.batch_tokens) == ("cuda", "NVIDIA Fake GPU", 16384)
    assert tally.rows_alike is (not by_position)
    assert tally.filler_tokens > 0  # 20 texts of one length in a call of 16384 // length rows
    assert "on CUDA (NVIDIA Fake GPU)" in caplog.text and "(auto: the measured best on CUDA)" in caplog.text
    assert ("two runs can differ" in caplog.text) is by_position


def test_the_store_keeps_providers_devices_and_budgets_apart(model_dir, tmp_path, monkeypatch):
    cpu, h200, a100 = Provider("cpu", "x"), Provider("cuda", "NVIDIA H200"), Provider("cuda", "NVIDIA A100-SXM4-80GB")
    keys = {
        cpu.store_key("m-r1", 512),
        cpu.store_key("m-r1", 64),
        h200.store_key("m-r1", 16384),
        h200.store_key("m-r1", 4096),
        a100.store_key("m-r1", 16384),
    }
    assert "m-r1" in keys and len(keys) == 4  # the CPU's key is the model's, whatever its budget
    assert h200.store_key("m-r1", 16384) == "m-r1-cuda-nvidia-h200-b16384"
    path = write_texts(tmp_path / "texts.parquet", texts_of(15, seed=9))
    files, fp, root = ModelFiles(model_dir, FILE, "mean"), fingerprint(tmp_path), tmp_path / "store"
    assert run_embed(path, files, 0, 1, tmp_path / "cpu.parquet", 1, 64, fp, root) == 15
    with monkeypatch.context() as gpu:
        use_fake_gpu(gpu)
        assert run_embed(path, files, 0, 1, tmp_path / "gpu.parquet", 1, 64, fp, root, cuda=True) == 15  # not the CPU's
    assert run_embed(path, files, 0, 1, tmp_path / "cpu-again.parquet", 1, 64, fp, root) == 0
    assert sorted(p.name for p in root.iterdir()) == sorted(
        {f"{model_hash(fp)}-r{RECIPE_VERSION}", f"{model_hash(fp)}-r{RECIPE_VERSION}-cuda-nvidia-fake-gpu-b64"}
    )


def test_cuda_asked_for_where_there_is_none_stops_the_job_before_any_work(model_dir, tmp_path, monkeypatch):
    import onnxruntime

    path = write_texts(tmp_path / "texts.parquet", texts_of(5, seed=10))
    args = (
        path,
        ModelFiles(model_dir, FILE, "mean"),
        0,
        1,
        tmp_path / "out.parquet",
        1,
        "auto",
        fingerprint(tmp_path),
        tmp_path / "store",
    )
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():  # the CPU build of onnxruntime
        with pytest.raises(EvalError, match="onnxruntime has no CUDA provider here.*embed.cuda: false"):
            run_embed(*args, cuda=True)
    # onnxruntime-gpu lists its CUDA provider on any machine; the driver tells whether a GPU is there.
    monkeypatch.setattr(
        onnxruntime, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    try:
        providers.cuda_device_name()
        pytest.skip("this machine has an NVIDIA driver and a GPU")
    except EvalError:
        pass
    with pytest.raises(EvalError, match="embed.cuda is set but (there is no NVIDIA driver|the NVIDIA driver finds no)"):
        run_embed(*args, cuda=True)
    assert not (tmp_path / "out.parquet").exists() and not (tmp_path / "store").exists()
