"""The softmax NaN guards dropped before loading: exact, and only where the pattern is."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from fastembed import TextEmbedding
from fastembed.common.model_description import ModelSource, PoolingType
from onnx import TensorProto, helper

from support.tinymodel import build_tiny_model
from vipune_eval.errors import EvalError
from vipune_eval.stages.embed.embed import load_model
from vipune_eval.stages.embed.onnx_graph import drop_nan_guards, runnable_folder

TEXTS = [
    "a zebra at the zoo",
    "violin",
    "the hall and the zoo and a violin in the hall at night",
    "",
    "zebra zebra zebra",
]


def ops(model) -> list[str]:
    return [node.op_type for node in model.graph.node]


def as_exported(folder: Path, file: str = "model.onnx") -> TextEmbedding:
    """The model straight from its folder, through fastembed, guards and all."""
    name = f"test/exported-{folder.name}"
    if name not in {m["model"] for m in TextEmbedding.list_supported_models()}:
        TextEmbedding.add_custom_model(
            model=name,
            pooling=PoolingType.MEAN,
            normalization=True,
            sources=ModelSource(hf=name),
            dim=384,
            model_file=file,
        )
    return TextEmbedding(name, specific_model_path=str(folder), threads=1)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("guarded"), attention=True)


def test_the_guard_is_dropped_and_nothing_else(guarded):
    model = onnx.load(str(guarded / "model.onnx"))
    before = ops(model)
    assert drop_nan_guards(model) == 1
    after = ops(model)
    assert "IsNaN" not in after and after.count("Where") == before.count("Where") - 1  # the mask's Where stays
    assert len(after) == len(before) - 2
    assert "zero" in {i.name for i in model.graph.initializer}  # still read by the mask's Where
    onnx.checker.check_model(model)
    softmax = next(n for n in model.graph.node if n.op_type == "Softmax")
    assert any(softmax.output[0] in n.input for n in model.graph.node if n.op_type == "MatMul")


@pytest.mark.parametrize("batch_size", [1, 2, 256])  # 2 and 256 pad the shorter texts
def test_vectors_are_bit_equal_to_the_exported_graph(guarded, batch_size):
    rewritten = load_model(guarded, "model.onnx", "mean", threads=1)
    exported = as_exported(guarded)
    ours = np.stack(list(rewritten.embed(TEXTS, batch_size=batch_size)))
    theirs = np.stack(list(exported.embed(TEXTS, batch_size=batch_size)))
    assert np.array_equal(ours, theirs)
    assert np.isfinite(ours).all()


def test_the_attention_layer_moves_the_vectors(guarded, tmp_path):
    """The guarded model is not the bag of words in disguise: otherwise the test above says nothing."""
    plain = build_tiny_model(tmp_path / "plain")
    a = np.stack(list(load_model(guarded, "model.onnx", "mean", threads=1).embed(TEXTS[:3])))
    b = np.stack(list(load_model(plain, "model.onnx", "mean", threads=1).embed(TEXTS[:3])))
    assert np.abs(a - b).max() > 1e-3


def test_the_one_input_where_the_guard_matters_is_an_all_padding_text(guarded):
    """Only a row with no unmasked token gives NaN, which a tokenized text ([CLS] ... [SEP]) never is."""
    model = onnx.load(str(guarded / "model.onnx"))
    drop_nan_guards(model)
    feed = {"input_ids": np.array([[2, 5, 3]], np.int64), "token_type_ids": np.zeros((1, 3), np.int64)}
    exported = ort.InferenceSession(str(guarded / "model.onnx"), providers=["CPUExecutionProvider"])
    rewritten = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for mask, same in ((np.ones((1, 3), np.int64), True), (np.zeros((1, 3), np.int64), False)):
        x = exported.run(None, {**feed, "attention_mask": mask})[0]
        y = rewritten.run(None, {**feed, "attention_mask": mask})[0]
        assert np.array_equal(x, y, equal_nan=True) is same


def test_a_graph_without_guards_loads_from_its_own_folder(tmp_path):
    plain = build_tiny_model(tmp_path / "plain")
    with runnable_folder(plain, "model.onnx") as folder:
        assert folder == plain


def test_the_rewritten_folder_keeps_the_layout_and_goes_away(tmp_path):
    folder = build_tiny_model(tmp_path / "sub", attention=True, onnx_name="onnx/model.onnx")
    with runnable_folder(folder, "onnx/model.onnx") as runnable:
        assert runnable != folder
        assert (runnable / "tokenizer.json").resolve() == (folder / "tokenizer.json").resolve()
        assert "IsNaN" not in ops(onnx.load(str(runnable / "onnx" / "model.onnx")))
    assert not runnable.exists()
    assert "IsNaN" in ops(onnx.load(str(folder / "onnx" / "model.onnx")))  # the user's file is untouched
    vectors = np.stack(list(load_model(folder, "onnx/model.onnx", "mean", threads=1).embed(TEXTS)))
    assert np.array_equal(vectors, np.stack(list(as_exported(folder, "onnx/model.onnx").embed(TEXTS))))


def test_a_where_isnan_not_after_a_softmax_is_kept():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("IsNaN", ["r"], ["n"]),
        helper.make_node("Where", ["n", "zero", "r"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y], [onnx.numpy_helper.from_array(np.array(0.0, np.float32), "zero")])
    model = helper.make_model(graph)
    assert drop_nan_guards(model) == 0 and ops(model) == ["Relu", "IsNaN", "Where"]


def test_a_damaged_onnx_file_is_named(tmp_path):
    folder = build_tiny_model(tmp_path / "damaged")
    (folder / "model.onnx").write_bytes(b"not a protobuf at all")
    with pytest.raises(EvalError, match=r"model\.onnx: not a readable ONNX file"):
        load_model(folder, "model.onnx", "mean", threads=1)


def test_a_guard_with_its_own_constant_leaves_nothing_behind():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [
        helper.make_node("Softmax", ["x"], ["p"], axis=-1),
        helper.make_node("IsNaN", ["p"], ["n"]),
        helper.make_node("Constant", [], ["c"], value=onnx.numpy_helper.from_array(np.array(0.0, np.float32))),
        helper.make_node("Where", ["n", "c", "p"], ["g"]),
        helper.make_node("Relu", ["g"], ["y"]),
    ]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]))
    assert drop_nan_guards(model) == 1
    assert ops(model) == ["Softmax", "Relu"] and list(model.graph.node[1].input) == ["p"]
