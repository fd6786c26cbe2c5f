"""A tiny but real ONNX sentence-embedding model, for tests that must run offline.

The model is a bag of random word vectors: ``last_hidden_state = (word_table[input_ids] +
type_table[token_type_ids]) * attention_mask``. With mean pooling and L2 normalisation (as
registered in fastembed) texts sharing words get similar vectors, which is enough to make
dense retrieval over :mod:`support.synthetic` data meaningful.

The folder has the layout of a Hugging Face model repo, so it loads through fastembed's
custom-model path::

    TextEmbedding.add_custom_model(model="test/tiny", pooling=PoolingType.MEAN,
        normalization=True, sources=ModelSource(hf="test/tiny"), dim=384,
        model_file="model.onnx")
    TextEmbedding("test/tiny", specific_model_path=str(folder))
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from onnx import ModelProto, TensorProto, helper, numpy_helper, save_model
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

SPECIAL_TOKENS: tuple[str, ...] = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
# Appended after the words: the generator writes these and BertPreTokenizer splits them off.
PUNCTUATION: tuple[str, ...] = (".", ",", "?", "!", "'")
MAX_LENGTH = 512
OPSET = 17
IR_VERSION = 8  # opset 17 needs IR >= 8; old enough for any onnxruntime >= 1.14


def _vocab(words: Sequence[str]) -> dict[str, int]:
    tokens = list(SPECIAL_TOKENS)
    for word in [*words, *PUNCTUATION]:
        if word not in tokens:
            tokens.append(word)
    return {token: i for i, token in enumerate(tokens)}


def _tokenizer(vocab: dict[str, int]) -> Tokenizer:
    # Truncation is deliberately not set: fastembed takes it from tokenizer_config.json.
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.NFD(), normalizers.Lowercase(), normalizers.StripAccents()]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    tokenizer.enable_padding(pad_id=vocab["[PAD]"], pad_token="[PAD]")
    return tokenizer


def _graph(vocab_size: int, dim: int, seed: int, attention: bool = False) -> ModelProto:
    rng = np.random.default_rng(seed)
    word_table = rng.standard_normal((vocab_size, dim), dtype=np.float32)
    # Small, so that the segment embedding shared by all tokens does not dominate similarity.
    type_table = 0.02 * rng.standard_normal((2, dim), dtype=np.float32)
    batch_seq = ["batch", "sequence"]
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, batch_seq)
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [*batch_seq, dim])
    nodes = [
        helper.make_node("Gather", ["word_table", "input_ids"], ["words"]),
        helper.make_node("Gather", ["type_table", "token_type_ids"], ["types"]),
        helper.make_node("Add", ["words", "types"], ["embedded"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_float"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_float", "last_axis"], ["mask"]),
        helper.make_node("Mul", ["tokens", "mask"], ["last_hidden_state"]),
    ]
    initializers = [
        numpy_helper.from_array(word_table, "word_table"),
        numpy_helper.from_array(type_table, "type_table"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "last_axis"),
    ]
    if attention:
        layer, weights = _attention_layer(rng, dim)
        nodes[3:3] = layer
        initializers += weights
    else:
        nodes.insert(3, helper.make_node("Identity", ["embedded"], ["tokens"]))
    graph = helper.make_graph(nodes, "tiny_bag_of_words", inputs, [output], initializers)
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name="vipune-eval tests",
    )


def _attention_layer(rng: np.random.Generator, dim: int) -> tuple[list, list]:
    """One residual self-attention layer (``embedded`` -> ``tokens``) as torch's ONNX export of
    scaled-dot-product attention writes it: the mask as ``Where(mask, 0, -inf)`` added to the
    scores, and the softmax guarded by ``Where(IsNaN(p), 0, p)``."""
    weights = {name: 0.05 * rng.standard_normal((dim, dim), dtype=np.float32) for name in ("wq", "wk", "wv")}
    initializers = [numpy_helper.from_array(w, name) for name, w in weights.items()] + [
        numpy_helper.from_array(np.array(1 / np.sqrt(dim), np.float32), "scale"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
        numpy_helper.from_array(np.array(-np.inf, np.float32), "minus_inf"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "key_axis"),
    ]
    nodes = [
        helper.make_node("MatMul", ["embedded", "wq"], ["q"]),
        helper.make_node("MatMul", ["embedded", "wk"], ["k"]),
        helper.make_node("MatMul", ["embedded", "wv"], ["v"]),
        helper.make_node("Transpose", ["k"], ["k_t"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "k_t"], ["qk"]),
        helper.make_node("Mul", ["qk", "scale"], ["scores"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_bool"], to=TensorProto.BOOL),
        helper.make_node("Unsqueeze", ["mask_bool", "key_axis"], ["key_mask"]),
        helper.make_node("Where", ["key_mask", "zero", "minus_inf"], ["mask_bias"]),
        helper.make_node("Add", ["scores", "mask_bias"], ["masked_scores"]),
        helper.make_node("Softmax", ["masked_scores"], ["probabilities"], axis=-1),
        helper.make_node("IsNaN", ["probabilities"], ["is_nan"]),
        helper.make_node("Where", ["is_nan", "zero", "probabilities"], ["guarded"]),
        helper.make_node("MatMul", ["guarded", "v"], ["attended"]),
        helper.make_node("Add", ["embedded", "attended"], ["tokens"]),
    ]
    return nodes, initializers


def _write_json(path: Path, data: dict[str, object]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def build_tiny_model(
    folder: Path,
    *,
    dim: int = 384,
    vocab: Sequence[str] | None = None,
    seed: int = 0,
    onnx_name: str = "model.onnx",
    attention: bool = False,
) -> Path:
    """Write a tiny ONNX embedding model with its tokenizer files into ``folder``.

    ``vocab`` defaults to :data:`support.synthetic.VOCABULARY`; words outside it map to
    ``[UNK]``. ``onnx_name`` may contain a subfolder, e.g. ``onnx/model.onnx``. ``attention`` adds
    one self-attention layer exported the way torch exports it (NaN guard included). The output
    is deterministic for a given seed. Returns ``folder``.
    """
    if vocab is None:
        from .synthetic import VOCABULARY

        vocab = VOCABULARY
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    token_ids = _vocab(vocab)

    onnx_path = folder / onnx_name
    onnx_path.parent.mkdir(parents=True, exist_ok=True)
    save_model(_graph(len(token_ids), dim, seed, attention), str(onnx_path))

    _tokenizer(token_ids).save(str(folder / "tokenizer.json"))
    special = {
        "pad_token": "[PAD]",
        "unk_token": "[UNK]",
        "cls_token": "[CLS]",
        "sep_token": "[SEP]",
    }
    _write_json(folder / "special_tokens_map.json", special)
    _write_json(
        folder / "tokenizer_config.json",
        {
            **special,
            "model_max_length": MAX_LENGTH,
            "do_lower_case": True,
            "tokenizer_class": "PreTrainedTokenizerFast",
        },
    )
    _write_json(
        folder / "config.json",
        {
            "model_type": "tiny-bag-of-words",
            "hidden_size": dim,
            "vocab_size": len(token_ids),
            "type_vocab_size": 2,
            "max_position_embeddings": MAX_LENGTH,
            "pad_token_id": token_ids["[PAD]"],
        },
    )
    return folder
