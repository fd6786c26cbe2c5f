"""The model where vipune looks for it: an hf-hub cache laid out from a model folder."""

from support.tinymodel import build_tiny_model
from vipune_eval.core.io import sha256_file
from vipune_eval.vipune.home import build_vipune_hf_home


def test_vipune_hf_home_has_the_layout_hf_hub_resolves(tmp_path):
    model = build_tiny_model(tmp_path / "m", onnx_name="onnx/model.onnx")
    home = build_vipune_hf_home(model, "onnx/model.onnx", "BAAI/bge-small-en-v1.5", "abc123", tmp_path / "home")
    repo = home / "hub" / "models--BAAI--bge-small-en-v1.5"
    assert (repo / "refs" / "abc123").read_text() == "abc123"
    snapshot = repo / "snapshots" / "abc123"
    assert sha256_file(snapshot / "onnx/model.onnx") == sha256_file(model / "onnx/model.onnx")
    assert (snapshot / "tokenizer.json").is_file() and not (snapshot / "tokenizer.json").is_symlink()


def test_vipune_hf_home_puts_the_onnx_file_where_vipune_asks_first(tmp_path):
    """vipune asks hf-hub for onnx/model.onnx first and for model.onnx only after that request
    failed: a model folder's root model.onnx is laid out at onnx/model.onnx (no request)."""
    model = build_tiny_model(tmp_path / "m")
    home = build_vipune_hf_home(model, "model.onnx", "BAAI/bge-small-en-v1.5", "abc123", tmp_path / "home")
    snapshot = home / "hub" / "models--BAAI--bge-small-en-v1.5" / "snapshots" / "abc123"
    assert sha256_file(snapshot / "onnx" / "model.onnx") == sha256_file(model / "model.onnx")
    assert not (snapshot / "model.onnx").exists()
