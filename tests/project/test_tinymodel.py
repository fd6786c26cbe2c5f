"""The tiny ONNX model loads through fastembed's custom-model path and behaves like a model."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before anything imports huggingface_hub

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from fastembed import TextEmbedding
from tokenizers import Tokenizer

from support.synthetic import VOCABULARY
from support.tinymodel import build_tiny_model
from vipune_eval.stages.embed.embed import load_model

TEXTS = [
    "What did I plant in my garden last spring?",
    "I planted tomato and basil seedlings in the greenhouse.",
    "My puppy needs a new leash and collar.",
    "how many marathon races did i run this year",
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def model(model_dir: Path) -> TextEmbedding:
    return load_model(model_dir, "model.onnx", "mean", threads=1)


def reference_embed(model_dir: Path, texts: list[str], onnx_name: str = "model.onnx") -> np.ndarray:
    """Plain onnxruntime + tokenizers: mean pooling over the attention mask, then L2."""
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=512)
    encodings = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    session = ort.InferenceSession(str(model_dir / onnx_name), providers=["CPUExecutionProvider"])
    (hidden,) = session.run(
        ["last_hidden_state"],
        {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
    )
    pooled = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def test_files_written(model_dir: Path) -> None:
    names = {p.name for p in model_dir.iterdir()}
    assert {
        "model.onnx",
        "tokenizer.json",
        "tokenizer_config.json",
        "config.json",
        "special_tokens_map.json",
    } <= names
    config = json.loads((model_dir / "tokenizer_config.json").read_text())
    assert config["model_max_length"] == 512
    # truncation is left to fastembed, which reads it from tokenizer_config.json
    assert json.loads((model_dir / "tokenizer.json").read_text())["truncation"] is None
    assert (model_dir / "model.onnx").stat().st_size < 4_000_000


def test_tokenizer_layout(model_dir: Path) -> None:
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    assert [tokenizer.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]")] == [0, 1, 2, 3]
    assert tokenizer.token_to_id(VOCABULARY[0]) == 4
    tokens = tokenizer.encode("What did I plant in my Garden?").tokens
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    assert "garden" in tokens and "?" in tokens
    # every word of the generator's vocabulary is known
    unk = tokenizer.token_to_id("[UNK]")
    assert unk not in tokenizer.encode(" ".join(VOCABULARY), add_special_tokens=False).ids


def test_all_inputs_used(model_dir: Path) -> None:
    session = ort.InferenceSession(str(model_dir / "model.onnx"), providers=["CPUExecutionProvider"])
    assert {i.name for i in session.get_inputs()} == {
        "input_ids",
        "attention_mask",
        "token_type_ids",
    }
    ids = np.array([[2, 10, 11, 3]], dtype=np.int64)
    feed = {
        "input_ids": ids,
        "attention_mask": np.ones_like(ids),
        "token_type_ids": np.zeros_like(ids),
    }
    base = session.run(None, feed)[0]
    assert base.shape == (1, 4, 384) and base.dtype == np.float32
    masked = session.run(None, {**feed, "attention_mask": np.array([[1, 1, 0, 0]])})[0]
    assert np.all(masked[0, 2:] == 0) and np.allclose(masked[0, :2], base[0, :2])
    typed = session.run(None, {**feed, "token_type_ids": np.ones_like(ids)})[0]
    assert not np.allclose(typed, base)


def test_deterministic(tmp_path: Path, model_dir: Path) -> None:
    again = build_tiny_model(tmp_path / "again")
    assert (again / "model.onnx").read_bytes() == (model_dir / "model.onnx").read_bytes()
    assert (again / "tokenizer.json").read_bytes() == (model_dir / "tokenizer.json").read_bytes()
    other = build_tiny_model(tmp_path / "other", seed=1)
    assert (other / "model.onnx").read_bytes() != (model_dir / "model.onnx").read_bytes()


def test_fastembed_custom_model(model: TextEmbedding) -> None:
    assert model.embedding_size == 384
    vectors = np.array(list(model.embed(TEXTS)))
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    sims = vectors @ vectors.T
    off_diagonal = sims[~np.eye(len(TEXTS), dtype=bool)]
    assert off_diagonal.max() < 0.99  # distinct texts, distinct vectors
    # sharing words (garden, plant, in, i) makes texts closer than unrelated ones
    assert sims[0, 1] > sims[1, 2]


def test_fastembed_matches_reference(model: TextEmbedding, model_dir: Path) -> None:
    long_text = " ".join(VOCABULARY[:700])
    texts = [*TEXTS, long_text]
    ours = np.array(list(model.embed(texts, batch_size=2)))
    reference = reference_embed(model_dir, texts)
    cosines = np.sum(ours * reference, axis=1)
    assert cosines.min() > 0.9999


def test_fastembed_truncates_to_512_tokens(model: TextEmbedding) -> None:
    words = list(VOCABULARY[:1000])
    (full,) = model.embed([" ".join(words)])
    # [CLS] + 510 words + [SEP]: the words after the 510th must not change anything
    (cut,) = model.embed([" ".join(words[:510])])
    (cut_short,) = model.embed([" ".join(words[:500])])
    assert float(full @ cut) > 0.9999
    assert float(full @ cut_short) < 0.9999


def test_onnx_in_subfolder(tmp_path: Path) -> None:
    folder = build_tiny_model(tmp_path / "sub", dim=32, onnx_name="onnx/model.onnx")
    assert (folder / "onnx" / "model.onnx").is_file()
    embedder = load_model(folder, "onnx/model.onnx", "mean", threads=1)
    (vector,) = embedder.embed(["my garden"])
    assert vector.shape == (32,)
    reference = reference_embed(folder, ["my garden"], "onnx/model.onnx")[0]
    assert float(vector @ reference) > 0.9999
