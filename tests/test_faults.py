"""vipune faults, preflight failures and isolation: every failure names persona, command, stderr."""

import json
import os

import numpy as np
import pytest

from vipune_eval.io import EvalError
from vipune_eval.persona import Persona
from vipune_eval.preflight import run_preflight
from vipune_eval.sources import binary_fingerprint, isolated_env
from vipune_eval.vipune import Vipune, VipuneError, import_lines
from vipune_eval.embed import load_model


@pytest.fixture
def model(vipune_tiny_model_dir):
    return load_model(vipune_tiny_model_dir, "model.onnx", "mean", threads=1)


@pytest.fixture
def persona(model):
    texts = ["user: my garden has tomatoes", "user: the train was late", "user: I play the violin"]
    vectors = np.array(list(model.embed(texts)), np.float32)
    question = '-q "what grows in my garden?"'
    return Persona("q1", question, [f"q1::s{i}" for i in range(3)], [f"s{i}" for i in range(3)],
                   ["2023-01-01T00:00:00Z"] * 3, texts, vectors,
                   np.array(list(model.embed([question])), np.float32)[0])


def client(binary, hf_home, tmp_path, timeout=30.0, **env):
    return Vipune(binary, isolated_env({"HF_HOME": str(hf_home), **env}, tmp_path / "xdg"), timeout)


def test_question_starting_with_dash_and_quotes_reaches_vipune_as_data(fake_vipune_bin, vipune_hf_home,
                                                                       tmp_path, persona):
    result = client(fake_vipune_bin, vipune_hf_home, tmp_path).evaluate(persona, 10, tmp_path)
    assert [rid for rid, _ in result.ranking][0] == "q1::s0"
    assert len(result.ranking) == 3


@pytest.mark.parametrize("fault, message", [
    ("crash", r"killed by signal 9"),
    ("garbage", r"stdout is not a JSON object: 'this is not JSON"),
    ("empty", r"stdout is not a JSON object: ''"),
    ("error", r"exited 1: injected"),
    ("short-import", r"import .*reported \{'inserted': 2, 'skipped': 0\}, but 3 rows"),
    ("hang", r"timed out after 2 s"),
])
def test_each_fault_names_the_persona_and_the_command(fake_vipune_bin, vipune_hf_home, tmp_path, persona,
                                                      fault, message):
    vipune = client(fake_vipune_bin, vipune_hf_home, tmp_path, timeout=2, FAKE_VIPUNE_FAULT=fault)
    with pytest.raises(VipuneError, match=message) as info:
        vipune.evaluate(persona, 10, tmp_path)
    assert "persona q1" in str(info.value)
    assert str(fake_vipune_bin) in str(info.value)


def test_too_long_question_exit_3_is_reported(fake_vipune_bin, vipune_hf_home, tmp_path, persona):
    persona.question = "garden " * 10_000  # 10 kB+ of text, over 512 tokens
    with pytest.raises(VipuneError, match=r"\(70000 characters\)` exited 3: Content too long") as info:
        client(fake_vipune_bin, vipune_hf_home, tmp_path).evaluate(persona, 10, tmp_path)
    assert "persona q1" in str(info.value)


def test_missing_binary(tmp_path, vipune_hf_home, persona):
    with pytest.raises(VipuneError, match="cannot run"):
        client(tmp_path / "no-vipune", vipune_hf_home, tmp_path).evaluate(persona, 10, tmp_path)


def test_import_lines_carry_both_header_keys_and_exact_vectors(persona):
    import base64
    import json

    lines = import_lines(persona)
    header = json.loads(lines[0])
    assert header["version"] == header["format_version"] == 1 and header["rows"] == 3
    row = json.loads(lines[1])
    assert row["id"] == "q1::s0" and row["project_id"] == "q1" and row["retrieval_count"] == 0
    vector = np.frombuffer(base64.b64decode(row["embedding"]), "<f4")
    assert vector.shape == (384,) and np.array_equal(vector, persona.vectors[0])


def test_isolation_from_hostile_user_config_and_environment(fake_vipune_bin, vipune_hf_home, tmp_path,
                                                            persona, monkeypatch):
    baseline = client(fake_vipune_bin, vipune_hf_home, tmp_path).evaluate(persona, 10, tmp_path).ranking
    hostile = tmp_path / "user-config"
    (hostile / "vipune").mkdir(parents=True)
    (hostile / "vipune" / "config.toml").write_text("hybrid = false\nrecency_weight = 0.9\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(hostile))
    monkeypatch.setenv("VIPUNE_RECENCY_WEIGHT", "0.9")
    monkeypatch.setenv("VIPUNE_HYBRID", "false")
    monkeypatch.setenv("VIPUNE_DATABASE_PATH", str(tmp_path / "users-own.db"))
    env = isolated_env({"HF_HOME": str(vipune_hf_home)}, tmp_path / "private-xdg")
    assert not any(k.startswith("VIPUNE_") for k in env)
    assert env["XDG_CONFIG_HOME"] == str(tmp_path / "private-xdg")
    assert Vipune(fake_vipune_bin, env, 30).evaluate(persona, 10, tmp_path).ranking == baseline
    assert not (tmp_path / "users-own.db").exists()


def preflight(binary, hf_home, model_dir, tmp_path, **env):
    fingerprint = tmp_path / "fp.json"
    fingerprint.write_text(json.dumps(binary_fingerprint(binary, tmp_path / "cache")))
    os.environ.update(env)
    try:
        return run_preflight(binary, fingerprint, hf_home, model_dir, "model.onnx", "mean", 30,
                             tmp_path / "preflight.json")
    finally:
        for key in env:
            del os.environ[key]


def test_preflight_passes_on_a_faithful_binary(fake_vipune_bin, vipune_hf_home, vipune_tiny_model_dir, tmp_path):
    findings = preflight(fake_vipune_bin, vipune_hf_home, vipune_tiny_model_dir, tmp_path)
    assert findings["embedding_parity"]["min_cosine"] > 0.999
    assert findings["query_over_512_tokens"] == "exit 3"
    assert (tmp_path / "preflight.json").exists()


@pytest.mark.parametrize("fault, message", [
    ("no-import", r"vipune 0.20.0 has no import or export command.*cargo install vipune"),
    ("cls-pooling", r"embedding parity failed.*model.onnx with mean pooling"),
])
def test_preflight_stops_a_binary_that_breaks_the_contract(fake_vipune_bin, vipune_hf_home,
                                                           vipune_tiny_model_dir, tmp_path, fault, message):
    with pytest.raises(EvalError, match=message):
        preflight(fake_vipune_bin, vipune_hf_home, vipune_tiny_model_dir, tmp_path, FAKE_VIPUNE_FAULT=fault)
    assert not (tmp_path / "preflight.json").exists()


def test_preflight_catches_a_different_model_in_vipunes_cache(fake_vipune_bin, tmp_path, vipune_tiny_model_dir):
    from vipune_eval.sources import build_vipune_hf_home
    from support.tinymodel import build_tiny_model

    other = build_tiny_model(tmp_path / "other", seed=9)
    home = build_vipune_hf_home(other, "model.onnx", "BAAI/bge-small-en-v1.5",
                                "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a", tmp_path / "home")
    with pytest.raises(EvalError, match="embedding parity failed"):
        preflight(fake_vipune_bin, home, vipune_tiny_model_dir, tmp_path)


def test_results_are_never_filed_under_another_binarys_fingerprint(fake_vipune_bin, tmp_path):
    from vipune_eval.vipune import check_fingerprint

    fingerprint = tmp_path / "fp.json"
    fingerprint.write_text(json.dumps(binary_fingerprint(fake_vipune_bin, tmp_path / "cache")))
    assert check_fingerprint(fake_vipune_bin, fingerprint)["sha256"]
    rebuilt = tmp_path / "vipune"
    rebuilt.write_bytes(fake_vipune_bin.read_bytes() + b"# rebuilt\n")
    with pytest.raises(EvalError, match="is not the binary this result belongs to"):
        check_fingerprint(rebuilt, fingerprint)
