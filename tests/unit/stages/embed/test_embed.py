"""embed: vipune's recipe through fastembed's custom-model path, every text once, Parquet layout."""

import os

import numpy as np
import onnxruntime as ort
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer

from support.synthetic import VOCABULARY
from support.tinymodel import build_tiny_model
from vipune_eval.core.io import text_id
from vipune_eval.core.model_files import ModelFiles
from vipune_eval.core.persona import Vectors
from vipune_eval.stages.embed.embed import load_model, run_embed
from vipune_eval.stages.filter.rows import TEXTS_SCHEMA

os.environ["HF_HUB_OFFLINE"] = "1"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("model"), onnx_name="onnx/model.onnx")


@pytest.fixture(scope="module")
def texts_path(tmp_path_factory):
    words = list(VOCABULARY[10:200])
    texts = [" ".join(words[i : i + 5 + i % 7]) for i in range(60)]
    texts.append(" ".join(words * 4))  # 760 words: over 512 tokens, truncated by the model
    path = tmp_path_factory.mktemp("texts") / "texts.parquet"
    pq.write_table(pa.Table.from_pylist([{"text_id": text_id(t), "text": t} for t in texts], schema=TEXTS_SCHEMA), path)
    return path


def fingerprint(folder, text='{"kind": "model", "files": {"onnx/model.onnx": "abc"}}'):
    path = folder / "model-fingerprint.json"
    path.write_text(text)
    return path


def reference_embedding(model_dir, text, pooling="mean"):
    """vipune's recipe written out by hand: onnxruntime, mean pooling over the mask, L2."""
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.enable_truncation(512)
    ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
    mask = np.ones_like(ids)
    session = ort.InferenceSession(str(model_dir / "onnx/model.onnx"))
    hidden = session.run(
        ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    )[0][0]
    vector = hidden.mean(axis=0) if pooling == "mean" else hidden[0]
    return vector / np.linalg.norm(vector)


def test_shards_partition_the_texts_and_vectors_follow_the_recipe(model_dir, texts_path, tmp_path):
    outs = [tmp_path / f"shard-{i}.parquet" for i in range(3)]
    counts = [
        run_embed(
            texts_path,
            ModelFiles(model_dir, "onnx/model.onnx", "mean"),
            i,
            3,
            out,
            threads=1,
            batch_tokens=64,
            model_fingerprint=fingerprint(tmp_path),
            store=tmp_path / "store",
        )
        for i, out in enumerate(outs)
    ]
    texts = pq.read_table(texts_path).to_pylist()
    ids = [tid for out in outs for tid in pq.read_table(out).column("text_id").to_pylist()]
    assert sorted(ids) == sorted(t["text_id"] for t in texts)  # each text exactly once
    assert sum(counts) == len(texts) and min(counts) > 0

    table = pq.read_table(outs[0])
    assert table.schema.field("embedding").type == pa.list_(pa.float32(), 384)
    vectors = Vectors(outs)
    for text in texts[:5] + texts[-1:]:
        got = vectors.get([text["text_id"]])[0]
        assert np.dot(got, reference_embedding(model_dir, text["text"])) > 0.9999
        assert np.linalg.norm(got) == pytest.approx(1.0, abs=1e-5)

    rows = {
        r["text_id"]: r
        for out in outs
        for r in pq.read_table(out, columns=["text_id", "tokens", "truncated"]).to_pylist()
    }
    long_text = rows[texts[-1]["text_id"]]
    assert long_text["tokens"] == 760 + 2 and long_text["truncated"]
    short = rows[texts[0]["text_id"]]
    assert short["tokens"] == 5 + 2 and not short["truncated"]


def test_pooling_is_part_of_the_recipe(model_dir):
    mean = np.array(list(load_model(model_dir, "onnx/model.onnx", "mean", threads=1).embed(["garden tomato"])))[0]
    cls = np.array(list(load_model(model_dir, "onnx/model.onnx", "cls", threads=1).embed(["garden tomato"])))[0]
    assert np.dot(mean, reference_embedding(model_dir, "garden tomato")) > 0.9999
    assert np.dot(cls, reference_embedding(model_dir, "garden tomato", "cls")) > 0.9999
    assert np.dot(mean, cls) < 0.99
    # Loading twice in one process must not trip fastembed's one-registration-per-name rule.
    load_model(model_dir, "onnx/model.onnx", "mean", threads=1)


def test_missing_embedding_is_a_clear_error(model_dir, texts_path, tmp_path):
    out = tmp_path / "one.parquet"
    run_embed(
        texts_path,
        ModelFiles(model_dir, "onnx/model.onnx", "mean"),
        0,
        5,
        out,
        threads=1,
        batch_tokens=64,
        model_fingerprint=fingerprint(tmp_path),
        store=tmp_path / "store",
    )
    vectors = Vectors([out])
    with pytest.raises(Exception, match="has no embedding"):
        vectors.get(["0" * 20])


def write_texts(path, texts):
    pq.write_table(pa.Table.from_pylist([{"text_id": text_id(t), "text": t} for t in texts], schema=TEXTS_SCHEMA), path)
    return path


def test_a_text_another_view_embedded_with_the_same_model_is_read_from_the_store(model_dir, tmp_path):
    shared = ["garden tomato basil", "violin concert"]
    first = write_texts(tmp_path / "a.parquet", shared + ["only in the first view"])
    second = write_texts(tmp_path / "b.parquet", shared + ["only in the second view", ""])
    fp, store = fingerprint(tmp_path), tmp_path / "store"
    assert (
        run_embed(
            first, ModelFiles(model_dir, "onnx/model.onnx", "mean"), 0, 1, tmp_path / "ea.parquet", 1, 64, fp, store
        )
        == 3
    )
    embedded = run_embed(
        second, ModelFiles(model_dir, "onnx/model.onnx", "mean"), 0, 1, tmp_path / "eb.parquet", 1, 64, fp, store
    )
    assert embedded == 1  # the shared texts come from the store; the empty text needs no model
    a, b = Vectors([tmp_path / "ea.parquet"]), Vectors([tmp_path / "eb.parquet"])
    ids = [text_id(t) for t in shared]
    assert np.array_equal(a.get(ids), b.get(ids))
    assert not b.get([text_id("")]).any()  # empty text: the zero vector, as vipune gives it
    # Another model's vectors are never served.
    other = tmp_path / "other-fp.json"
    other.write_text('{"kind": "model", "files": {"onnx/model.onnx": "def"}}')
    again = run_embed(
        second, ModelFiles(model_dir, "onnx/model.onnx", "mean"), 0, 1, tmp_path / "ec.parquet", 1, 64, other, store
    )
    assert again == 3


def test_a_damaged_tokenizer_is_named(model_dir, tmp_path):
    import shutil

    from vipune_eval.errors import EvalError

    broken = shutil.copytree(model_dir, tmp_path / "broken")
    (broken / "tokenizer.json").write_text("{not json")
    with pytest.raises(EvalError, match=r"broken/tokenizer.json: not a readable tokenizer.json"):
        load_model(broken, "onnx/model.onnx", "mean", threads=1)


def test_token_counts_do_not_depend_on_the_batch(tmp_path):
    from vipune_eval.core.tokens import count_tokens, load_tokenizer

    model = build_tiny_model(tmp_path / "model")
    texts = [" ".join(["word"] * n) for n in (0, 1, 7, 600, 3, 2)]
    whole = count_tokens(model, texts, batch=len(texts))
    assert list(count_tokens(model, texts, batch=4)) == list(whole)
    tokenizer = load_tokenizer(model / "tokenizer.json")
    assert list(whole) == [len(tokenizer.encode(t).ids) for t in texts] and whole[3] > 512
