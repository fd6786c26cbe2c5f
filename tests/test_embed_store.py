"""Issue 23: token-budget batches, the vector store shared by every view, embed.cuda."""

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

from vipune_eval.stages.embed.embed import ModelFiles, RECIPE_VERSION, load_model, model_hash, run_embed, token_batches
from vipune_eval.stages.filter.rows import TEXTS_SCHEMA
from vipune_eval.errors import EvalError
from vipune_eval.core.io import text_id
from vipune_eval.core.persona import Vectors
from vipune_eval.stages.embed.store import VectorStore
from support.synthetic import VOCABULARY
from support.tinymodel import build_tiny_model

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
    pq.write_table(pa.Table.from_pylist([{"text_id": text_id(t), "text": t} for t in dict.fromkeys(texts)],
                                        schema=TEXTS_SCHEMA), path)
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
            run_embed({"a": a, "b": b}[view], ModelFiles(model_dir, FILE, "mean"), 0, 1,
                      tmp_path / f"{order}-{view}.parquet", 1, budget, fp, store)
        results[order] = {**vectors_of(tmp_path / f"{order}-a.parquet"),
                          **vectors_of(tmp_path / f"{order}-b.parquet")}
    assert results["ab"].keys() == results["ba"].keys()
    for tid in results["ab"]:
        assert results["ab"][tid].tobytes() == results["ba"][tid].tobytes()


JOB = """
import sys
from pathlib import Path
from vipune_eval.stages.embed.embed import ModelFiles, run_embed
texts, model, fp, store, out = map(Path, sys.argv[1:6])
print(run_embed(texts, ModelFiles(model, "onnx/model.onnx", "mean"), 0, 1, out, 1, 64, fp, store))
"""


def test_two_concurrent_jobs_embed_each_text_once(model_dir, tmp_path):
    texts = texts_of(400, seed=2)
    views = [write_texts(tmp_path / f"{v}.parquet", texts[i:i + 300]) for v, i in (("a", 0), ("b", 100))]
    fp, store = fingerprint(tmp_path), tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    jobs = [subprocess.Popen([sys.executable, "-c", JOB, str(view), str(model_dir), str(fp), str(store),
                              str(tmp_path / f"out-{n}.parquet")], stdout=subprocess.PIPE, text=True, env=env)
            for n, view in enumerate(views)]
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
    job = threading.Thread(target=lambda: result.update(n=run_embed(
        path, ModelFiles(model_dir, FILE, "mean"), 0, 1, tmp_path / "out.parquet", 1, 64, fp, root)))
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
    assert run_embed(path2, ModelFiles(model_dir, FILE, "mean"), 0, 1, tmp_path / "out2.parquet", 1, 64, fp, root) == len(set(texts2))
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

    monkeypatch.setattr(onnxruntime, "get_available_providers",
                        lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(fastembed, "TextEmbedding", Recording)
    if "CUDAExecutionProvider" in active:
        assert isinstance(load_model(model_dir, FILE, "mean", threads=1, cuda=True), Recording)
    else:  # fastembed only warns when CUDA did not come up: the harness refuses
        with pytest.raises(EvalError, match="the session runs on CPUExecutionProvider"):
            load_model(model_dir, FILE, "mean", threads=1, cuda=True)
    assert asked["providers"][0] == "CUDAExecutionProvider"


@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_a_damaged_part_is_set_aside_named_and_its_texts_embedded_again(model_dir, tmp_path, caplog, damage):
    """Issue 32, item 3: a part cut short (a crash before its bytes reached the disk, a full disk,
    a partial copy) stopped every later embed job with pyarrow's ArrowInvalid, for ever."""
    texts = texts_of(30, seed=5)
    path = write_texts(tmp_path / "texts.parquet", texts)
    fp, root = fingerprint(tmp_path), tmp_path / "store"
    files = ModelFiles(model_dir, FILE, "mean")
    assert run_embed(path, files, 0, 1, tmp_path / "first.parquet", 1, 64, fp, root) == len(set(texts))
    parts = root / f"{model_hash(fp)}-r{RECIPE_VERSION}" / "parts"
    (part,) = parts.glob("*.parquet")
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"")
    with caplog.at_level("WARNING", logger="vipune_eval"):
        again = run_embed(path, files, 0, 1, tmp_path / "again.parquet", 1, 64, fp, root)
    assert again == len(set(texts))  # the part's texts are embedded again
    assert any(part.name in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
    assert (parts.parent / "damaged" / part.name).exists() and not part.exists()  # set aside, kept to look at
    first, second = vectors_of(tmp_path / "first.parquet"), vectors_of(tmp_path / "again.parquet")
    assert first.keys() == second.keys()
    assert all(first[t].tobytes() == second[t].tobytes() for t in first)
    assert run_embed(path, files, 0, 1, tmp_path / "third.parquet", 1, 64, fp, root) == 0  # repaired for good
