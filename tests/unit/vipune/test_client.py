"""The vipune client: faults and isolation; every failure names persona,
command, stderr (the preflight: tests/unit/stages/search/test_preflight.py)."""

import json
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest

from vipune_eval.core.persona import Persona
from vipune_eval.stages.embed.embed import load_model
from vipune_eval.stages.search.vipune import evaluate, searches
from vipune_eval.vipune.client import Vipune, VipuneError, isolated_env
from vipune_eval.vipune.settings import VipuneSettings


@pytest.fixture
def model(vipune_tiny_model_dir):
    return load_model(vipune_tiny_model_dir, "model.onnx", "mean", threads=1)


@pytest.fixture
def persona(model):
    texts = ["user: my garden has tomatoes", "user: the train was late", "user: I play the violin"]
    vectors = np.array(list(model.embed(texts)), np.float32)
    question = '-q "what grows in my garden?"'
    return Persona(
        "q1",
        question,
        [f"q1::s{i}" for i in range(3)],
        [f"s{i}" for i in range(3)],
        ["2023-01-01T00:00:00Z"] * 3,
        texts,
        vectors,
        np.array(list(model.embed([question])), np.float32)[0],
    )


def flags(limit):
    """The binary lane's two searches at this limit, as a job's settings give them."""
    return searches(VipuneSettings("vipune", Path("fp.json"), Path("hf"), Path("tmp"), 30.0), limit)


def client(binary, hf_home, tmp_path, timeout=30.0, **env):
    os.environ.update(env)
    try:
        return Vipune(binary, tmp_path / "home", timeout, hf_home=hf_home)
    finally:
        for key in env:
            del os.environ[key]


def test_question_starting_with_dash_and_quotes_reaches_vipune_as_data(any_vipune, vipune_hf_home, tmp_path, persona):
    result = evaluate(client(any_vipune, vipune_hf_home, tmp_path), persona, flags(10), 10, tmp_path)
    assert [rid for rid, _ in result["hybrid"]["ranking"]][0] == "q1::s0"
    assert len(result["hybrid"]["ranking"]) == 3 and len(result["semantic"]["ranking"]) == 3


def test_question_id_starting_with_dash_is_passed_as_project_value(any_vipune, vipune_hf_home, tmp_path, persona):
    """Regression: `--project -abc` read as a flag; the client passes --project=ID."""
    dashed = Persona(
        "-abc",
        persona.question,
        ["-abc::s0", "-abc::s1", "-abc::s2"],
        persona.session_ids,
        persona.created_at,
        persona.texts,
        persona.vectors,
        persona.query_vector,
    )
    result = evaluate(client(any_vipune, vipune_hf_home, tmp_path), dashed, flags(10), 10, tmp_path)
    assert result["hybrid"]["ranking"][0][0] == "-abc::s0"


@pytest.mark.parametrize(
    "fault, message",
    [
        ("crash", r"killed by signal 9"),
        ("garbage", r"stdout is not a JSON object: 'this is not JSON"),
        ("empty", r"stdout is not a JSON object: ''"),
        ("error", r"exited 1: injected"),
        ("short-import", r"import .*reported \{'inserted': 2, 'skipped': 0\}, but 3 rows"),
        ("hang", r"did not finish within 2 s \(vipune.timeout\)"),
        ("repeat-id", r"returned id 'q1::s\d' twice \(ranks 1 and 2; a contract violation\)"),
        ("over-limit", r"returned 4 results, more than --limit 3 \(a contract violation\)"),
    ],
)
def test_each_fault_names_the_persona_and_the_command(
    fake_vipune_bin, vipune_hf_home, tmp_path, persona, fault, message
):
    vipune = client(fake_vipune_bin, vipune_hf_home, tmp_path, timeout=2, FAKE_VIPUNE_FAULT=fault)
    limit = 3 if fault == "over-limit" else 10
    with pytest.raises(VipuneError, match=message) as info:
        evaluate(vipune, persona, flags(limit), limit, tmp_path)
    assert "persona q1" in str(info.value)
    assert str(fake_vipune_bin) in str(info.value)


@pytest.mark.parametrize(
    "fault, exit_code, error, timeout",
    [
        ("error", 1, "injected", None),
        ("crash", None, None, None),
        ("garbage", None, None, None),
        ("hang", None, None, 2),
        ("repeat-id", None, None, None),
    ],
)
def test_vipunes_exit_code_and_its_own_message_are_fields_of_the_error(
    fake_vipune_bin, vipune_hf_home, tmp_path, persona, fault, exit_code, error, timeout
):
    """A failed pair records them as fields (core.failed_pair): nothing reads them back from the text;
    a call killed at vipune.timeout carries that timeout (issue 51 item 6: it read "no exit code
    and no message from vipune")."""
    vipune = client(fake_vipune_bin, vipune_hf_home, tmp_path, timeout=2, FAKE_VIPUNE_FAULT=fault)
    with pytest.raises(VipuneError) as info:
        evaluate(vipune, persona, flags(10), 10, tmp_path)
    assert (info.value.exit_code, info.value.error, info.value.timeout) == (exit_code, error, timeout)


def test_a_timed_out_wrapper_does_not_leave_its_child_running(fake_vipune_bin, vipune_hf_home, tmp_path, persona):
    pid_file = tmp_path / "child.pid"
    vipune = client(
        fake_vipune_bin,
        vipune_hf_home,
        tmp_path,
        timeout=3,
        FAKE_VIPUNE_FAULT="hang-child",
        FAKE_VIPUNE_CHILD_PID=str(pid_file),
    )
    with pytest.raises(VipuneError, match="killed with its children"):
        evaluate(vipune, persona, flags(10), 10, tmp_path)
    child = int(pid_file.read_text())
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the wrapper's child {child} is still running")


def test_an_error_without_an_error_key_shows_what_was_printed(tmp_path):
    """Regression: a failing call with JSON but no `error` key read `exited 1: None`."""
    liar = tmp_path / "vipune"
    liar.write_text('#!/bin/sh\necho \'{"status": "bad"}\'\nexit 1\n')
    liar.chmod(0o755)
    with pytest.raises(VipuneError, match=r"exited 1: stdout: '\{\"status\": \"bad\"\}'") as info:
        Vipune(liar, tmp_path / "home", 10).call(["--json", "doctor", "--fts"], "persona q9")
    assert "None" not in str(info.value)
    assert (info.value.exit_code, info.value.error) == (1, None)  # it said nothing on stderr


def test_too_long_question_exit_3_is_reported(fake_vipune_bin, vipune_hf_home, tmp_path, persona):
    persona.question = "garden " * 10_000  # 10 kB+ of text, over 512 tokens
    with pytest.raises(
        VipuneError, match=r"\(70000 characters\)` exited 3: content exceeds 512-token embedding limit"
    ) as info:
        evaluate(client(fake_vipune_bin, vipune_hf_home, tmp_path), persona, flags(10), 10, tmp_path)
    assert "persona q1" in str(info.value)
    assert info.value.exit_code == 3 and info.value.error.startswith("content exceeds 512-token embedding limit")


def test_missing_binary(tmp_path, vipune_hf_home, persona):
    with pytest.raises(VipuneError, match="cannot run"):
        evaluate(client(tmp_path / "no-vipune", vipune_hf_home, tmp_path), persona, flags(10), 10, tmp_path)


def test_isolation_from_hostile_user_config_environment_and_home(
    any_vipune, vipune_hf_home, tmp_path, persona, monkeypatch
):
    baseline = evaluate(client(any_vipune, vipune_hf_home, tmp_path / "a"), persona, flags(10), 10, tmp_path)
    user_home = tmp_path / "user-home"
    for folder in (user_home / ".config" / "vipune", user_home / "Library" / "Application Support" / "vipune"):
        folder.mkdir(parents=True)
        (folder / "config.toml").write_text(
            f'recency_weight = 0.9\nembedding_model = "intfloat/e5-small"\ndatabase_path = "{user_home}/users-own.db"\n'
        )
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(user_home / ".config"))
    monkeypatch.setenv("FAKE_VIPUNE_PLATFORM", "macos")  # config under ~/Library, not XDG
    monkeypatch.setenv("VIPUNE_RECENCY_WEIGHT", "0.9")
    monkeypatch.setenv("VIPUNE_HYBRID", "false")
    monkeypatch.setenv("VIPUNE_DATABASE_PATH", str(user_home / "users-own.db"))
    env = isolated_env(tmp_path / "private-home")
    assert not any(k.startswith("VIPUNE_") for k in env)
    assert env["HOME"] == env["XDG_CONFIG_HOME"].removesuffix("/.config") == str(tmp_path / "private-home")
    again = evaluate(client(any_vipune, vipune_hf_home, tmp_path / "b"), persona, flags(10), 10, tmp_path)
    assert again["hybrid"]["ranking"] == baseline["hybrid"]["ranking"]
    assert sorted(p.name for p in user_home.iterdir()) == [".config", "Library"]  # no .vipune, no DB


def test_every_release_finds_the_model_and_none_reaches_the_network(tmp_path, monkeypatch):
    """$HF_HOME for 0.20.2, $HOME/.cache/huggingface (a link to it) for 0.20.1 and older; the hub
    client's proxy is a closed local port, and NO_PROXY cannot exempt the hub."""
    monkeypatch.setenv("NO_PROXY", "huggingface.co")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    hf_home = tmp_path / "hf"
    hf_home.mkdir()
    for _ in range(2):  # a second client on the same HOME keeps the link
        env = isolated_env(tmp_path / "home", hf_home)
    legacy = tmp_path / "home" / ".cache" / "huggingface"
    assert legacy.is_symlink() and legacy.resolve() == hf_home.resolve() == Path(env["HF_HOME"])
    assert {env[k] for k in ("ALL_PROXY", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY")} == {"http://127.0.0.1:9"}
    assert "NO_PROXY" not in env and "no_proxy" not in env


def test_vipune_touches_home_without_isolation(any_vipune, tmp_path):
    """The real binary, and the test double like it: without isolation, `version` alone creates
    ~/.vipune and the user's store (so a harness regression fails a test)."""
    import subprocess

    home = tmp_path / "home"
    home.mkdir()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("VIPUNE_")}, "HOME": str(home)}
    env.pop("XDG_CONFIG_HOME", None)
    proc = subprocess.run([str(any_vipune), "--json", "version"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0
    assert (home / ".vipune" / "memories.db").exists()
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("HOME is a file here: ~/.vipune cannot be created")
    denied = subprocess.run(
        [str(any_vipune), "--json", "version"], capture_output=True, text=True, env={**env, "HOME": str(blocked)}
    )
    assert denied.returncode == 1 and f"{blocked}/.vipune" in json.loads(denied.stdout)["error"]


def test_a_private_copy_that_cannot_run_is_named_beside_the_binary_it_copies(fake_vipune_bin, tmp_path):
    """A job runs its copy of vipune.binary (issue 51): where the copy cannot run (its folder on a
    noexec mount), the message names the configured binary and the copy."""
    copy = tmp_path / "job" / "vipune"
    copy.parent.mkdir()
    copy.write_bytes(fake_vipune_bin.read_bytes())  # not executable, as on a noexec mount
    with pytest.raises(
        VipuneError,
        match=rf"cannot run `{re.escape(str(fake_vipune_bin))} --json version` \(the "
        rf"job's copy of it, {re.escape(str(copy))}: is its folder on a noexec mount\?\)",
    ):
        Vipune(copy, tmp_path / "home", 5, shown=fake_vipune_bin).call(["--json", "version"], "test")
