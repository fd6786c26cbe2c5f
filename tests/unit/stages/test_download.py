"""The downloads against the hub's protocol, offline (issue 30).

tests/support/hub.py answers as the Hugging Face hub does (revision API, resolve URLs with LFS
redirects, ETags, Range requests, errors with X-Error-Code); the download commands reach it the
way they reach the hub, through HF_ENDPOINT (read by huggingface_hub at import, so each download
runs as the workflow runs it: ``vipune-eval download-…`` in a process of its own). The bytes are
generated here; the names, revisions and hashes are the real pins.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from support.hub import Hub
from support.scenarios import REPO
from vipune_eval.registry import datasets, models
from vipune_eval.vipune.contract import EMBED_MODEL_ID, EMBED_MODEL_REVISION

PAPER_AT = datasets.ORIGINAL_AT
DATA = b"[" + b"  " * 60_000 + b"]"  # 120 kB: served as an LFS file, in several chunks
BGE = (EMBED_MODEL_ID, EMBED_MODEL_REVISION)
LIMITS = ("30", "60")  # --timeout, --stall-timeout: far above what a local answer takes


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def hub():
    with Hub() as served:
        yield served


def run(hub: Hub, tmp_path: Path, command: str, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "HF_ENDPOINT": hub.endpoint,
        "HF_HOME": str(tmp_path / "hf-home"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    env.pop("HF_HUB_OFFLINE", None)
    return subprocess.run(
        [sys.executable, "-m", "vipune_eval", command, *args], env=env, capture_output=True, text=True, timeout=120
    )


def download_dataset(hub, tmp_path, block: dict, dest: str = "dl", limits=LIMITS) -> subprocess.CompletedProcess:
    """The download-dataset command as the workflow's rule builds it from a resolved block."""
    pins = [a for key in ("sha256", "size") if block[key] for a in (f"--{key}", str(block[key]))]
    return run(
        hub,
        tmp_path,
        "download-dataset",
        "--repo-id",
        block["repo_id"],
        "--filename",
        block["filename"],
        "--revision",
        block["revision"],
        *pins,
        "--timeout",
        limits[0],
        "--stall-timeout",
        limits[1],
        "--dest",
        str(tmp_path / dest),
        "--fingerprint-out",
        str(tmp_path / "fingerprint.json"),
    )


def fetched(hub: Hub, name: str) -> list[tuple[str, str, str | None]]:
    return [r for r in hub.requests if r[1].endswith(f"/{name}") and "/resolve/" in r[1]]


def test_the_default_config_asks_for_the_served_name_at_the_pinned_commit_and_checks_its_sha256(hub, tmp_path):
    """`vipune-eval download-dataset` with the default config: `longmemeval_m` at 2ec2a557…, its
    bytes checked against fb5413e3…; bytes that are not the release are refused and deleted."""
    block = datasets.resolve(yaml.safe_load((REPO / "config/config.yaml").read_text())["dataset"])
    hub.add("datasets", "xiaowu0162/longmemeval", PAPER_AT, {"longmemeval_m": DATA}, branch="main")
    proc = download_dataset(hub, tmp_path, block)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert fetched(hub, "longmemeval_m")[0][1] == f"/datasets/xiaowu0162/longmemeval/resolve/{PAPER_AT}/longmemeval_m"
    assert ("GET", f"/api/datasets/xiaowu0162/longmemeval/revision/{PAPER_AT}", None) in hub.requests
    assert (
        f"pinned fb5413e3b077c62927daab794836991a2fcfa61ceacab57dc679fb02daaff2d9, the hub announces {sha(DATA)}"
        in proc.stderr
    )
    assert not list((tmp_path / "dl").glob("*"))
    assert not (tmp_path / "fingerprint.json").exists()


def test_a_file_the_hub_announces_as_other_bytes_is_not_downloaded(hub, tmp_path):
    """An LFS file's redirect names its sha256 and size: other bytes than the pin are refused
    before the 2.7 GB transfer, not after it."""
    block = {**datasets.resolve({"preset": "m"}), "size": None}
    hub.add("datasets", "xiaowu0162/longmemeval", PAPER_AT, {"longmemeval_m": DATA})
    proc = download_dataset(hub, tmp_path, block)
    assert proc.returncode == 1
    assert (
        f"pinned {datasets.PRESETS['m'].sha256}, the hub announces {sha(DATA)}; nothing was downloaded" in proc.stderr
    )
    assert not list((tmp_path / "dl").glob("*"))


def test_bytes_damaged_in_transit_are_refused_by_their_sha256_and_deleted(hub, tmp_path):
    """The hub announces the pinned file, other bytes of its size arrive: the sha256 computed as
    they streamed refuses them, and nothing a rerun could take as complete is left."""
    hub.add("datasets", "xiaowu0162/longmemeval", PAPER_AT, {"longmemeval_m": DATA})
    hub.damaged["longmemeval_m"] = DATA[:-1] + b"x"
    block = {**datasets.resolve({"preset": "m"}), "sha256": sha(DATA), "size": len(DATA)}
    proc = download_dataset(hub, tmp_path, block)
    assert proc.returncode == 1
    assert f"pinned {sha(DATA)}, received {sha(hub.damaged['longmemeval_m'])}" in proc.stderr
    assert "the bytes were deleted" in proc.stderr
    assert not list((tmp_path / "dl").glob("*")) and not (tmp_path / "fingerprint.json").exists()


def test_bytes_of_another_size_are_refused(hub, tmp_path):
    hub.add("datasets", "xiaowu0162/longmemeval", PAPER_AT, {"longmemeval_m": DATA})
    hub.damaged["longmemeval_m"] = DATA + b" "
    block = {**datasets.resolve({"preset": "m"}), "sha256": None, "size": len(DATA)}
    proc = download_dataset(hub, tmp_path, block)
    assert f"received {len(DATA) + 1} bytes, the pin says {len(DATA)}; the bytes were deleted" in proc.stderr
    assert not list((tmp_path / "dl").glob("*"))


def test_a_json_name_on_the_papers_repository_gets_the_served_name_as_the_fix(hub, tmp_path):
    hub.add("datasets", "xiaowu0162/longmemeval", PAPER_AT, {"longmemeval_m": DATA})
    block = datasets.resolve({"preset": "m", "filename": "longmemeval_m.json"})
    proc = download_dataset(hub, tmp_path, block)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "the hub has no file 'longmemeval_m.json' in xiaowu0162/longmemeval" in proc.stderr
    assert "set dataset.filename to 'longmemeval_m'" in proc.stderr


def test_the_hubs_named_errors_become_messages_with_the_fix(hub, tmp_path):
    hub.add("datasets", "xiaowu0162/longmemeval", PAPER_AT, {"longmemeval_m": DATA})
    revision = download_dataset(hub, tmp_path, {**datasets.resolve({"preset": "m"}), "revision": "v9", "sha256": None})
    assert "the hub has no such revision of xiaowu0162/longmemeval" in revision.stderr
    repo = download_dataset(hub, tmp_path, {**datasets.resolve({"preset": "m"}), "repo_id": "nobody/nothing"})
    assert "the hub has no repository nobody/nothing" in repo.stderr
    assert "Traceback" not in revision.stderr + repo.stderr


def test_a_branch_resolves_to_its_commit_and_the_fingerprint_records_both(hub, tmp_path):
    hub.add("datasets", "xiaowu0162/longmemeval", PAPER_AT, {"longmemeval_m": DATA}, branch="main")
    proc = download_dataset(hub, tmp_path, {**datasets.resolve({"preset": "m", "revision": "main"})})
    assert proc.returncode == 0, proc.stderr
    fingerprint = json.loads((tmp_path / "fingerprint.json").read_text())
    assert fingerprint["revision"] == "main" and fingerprint["resolved_commit"] == PAPER_AT
    assert fingerprint["sha256"] == sha(DATA) and fingerprint["size"] == len(DATA)
    assert (tmp_path / "dl/longmemeval_m").read_bytes() == DATA
    assert f"dataset.revision: {PAPER_AT} and dataset.sha256: {sha(DATA)}" in proc.stderr  # how to pin it


def test_a_large_download_shows_its_progress_in_mb(hub, tmp_path):
    big = bytes(range(256)) * (3 * 4096 + 7)  # 3 MiB and a bit
    hub.add("datasets", "xiaowu0162/longmemeval", PAPER_AT, {"longmemeval_m": big})
    block = {**datasets.resolve({"preset": "m"}), "sha256": sha(big), "size": len(big)}
    proc = download_dataset(hub, tmp_path, block)
    assert proc.returncode == 0, proc.stderr
    assert "downloading dataset xiaowu0162/longmemeval/longmemeval_m at 2ec2a557" in proc.stderr
    assert ": 3 / 3 MB (" in proc.stderr and " MB/s" in proc.stderr


def test_an_interrupted_transfer_resumes_with_a_range_request(hub, tmp_path):
    hub.add("datasets", "xiaowu0162/longmemeval", PAPER_AT, {"longmemeval_m": DATA})
    hub.cut["longmemeval_m"] = 50_000
    block = {**datasets.resolve({"preset": "m"}), "sha256": sha(DATA), "size": len(DATA)}
    proc = download_dataset(hub, tmp_path, block)
    assert proc.returncode == 0, proc.stderr
    assert "transfer interrupted at 50000 bytes; resuming" in proc.stderr
    ranges = [r[2] for r in hub.requests if r[1].startswith("/cdn/")]
    assert ranges == [None, "bytes=50000-"]
    assert (tmp_path / "dl/longmemeval_m").read_bytes() == DATA
    assert not (tmp_path / "dl/longmemeval_m.part").exists()


def test_a_transfer_cut_on_every_try_names_the_url_and_a_rerun_resumes(hub, tmp_path):
    hub.add("datasets", "xiaowu0162/longmemeval", PAPER_AT, {"longmemeval_m": DATA})
    hub.cut["longmemeval_m"] = [20_000, 20_000, 20_000]
    block = {**datasets.resolve({"preset": "m"}), "sha256": sha(DATA), "size": len(DATA)}
    proc = download_dataset(hub, tmp_path, block)
    assert proc.returncode != 0
    url = f"{hub.endpoint}/datasets/xiaowu0162/longmemeval/resolve/{PAPER_AT}/longmemeval_m"
    assert f"from {url} stopped 3 times (last at 60000 bytes; kept in" in proc.stderr, proc.stderr
    assert (tmp_path / "dl/longmemeval_m.part").stat().st_size == 60_000
    again = download_dataset(hub, tmp_path, block)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "dl/longmemeval_m").read_bytes() == DATA


def test_a_part_left_by_a_killed_job_is_continued_not_restarted(hub, tmp_path):
    hub.add("datasets", "xiaowu0162/longmemeval", PAPER_AT, {"longmemeval_m": DATA})
    (tmp_path / "dl").mkdir()
    (tmp_path / "dl/longmemeval_m.part").write_bytes(DATA[:70_000])
    block = {**datasets.resolve({"preset": "m"}), "sha256": sha(DATA), "size": len(DATA)}
    assert download_dataset(hub, tmp_path, block).returncode == 0
    assert [r[2] for r in hub.requests if r[1].startswith("/cdn/")] == ["bytes=70000-"]
    assert (tmp_path / "dl/longmemeval_m").read_bytes() == DATA


def test_a_damaged_part_fails_its_sha256_and_is_not_kept(hub, tmp_path):
    hub.add("datasets", "xiaowu0162/longmemeval", PAPER_AT, {"longmemeval_m": DATA})
    (tmp_path / "dl").mkdir()
    (tmp_path / "dl/longmemeval_m.part").write_bytes(b"x" * 70_000)
    block = {**datasets.resolve({"preset": "m"}), "sha256": sha(DATA), "size": len(DATA)}
    proc = download_dataset(hub, tmp_path, block)
    assert proc.returncode == 1 and "sha256 mismatch" in proc.stderr
    assert list((tmp_path / "dl").iterdir()) == []
    assert download_dataset(hub, tmp_path, block).returncode == 0  # the rerun starts afresh
    assert (tmp_path / "dl/longmemeval_m").read_bytes() == DATA


def test_a_verified_file_already_there_is_not_fetched_again(hub, tmp_path):
    hub.add("datasets", "xiaowu0162/longmemeval", PAPER_AT, {"longmemeval_m": DATA})
    block = {**datasets.resolve({"preset": "m"}), "sha256": sha(DATA), "size": len(DATA)}
    assert download_dataset(hub, tmp_path, block).returncode == 0
    before = len(fetched(hub, "longmemeval_m"))
    assert download_dataset(hub, tmp_path, block).returncode == 0
    assert len(fetched(hub, "longmemeval_m")) == before


def test_the_cleaned_release_is_served_with_its_json_names(hub, tmp_path):
    block = {**datasets.resolve({"preset": "s-cleaned"}), "sha256": sha(DATA), "size": len(DATA)}
    assert (block["repo_id"], block["filename"], block["revision"]) == (
        "xiaowu0162/longmemeval-cleaned",
        "longmemeval_s_cleaned.json",
        datasets.CLEANED_AT,
    )
    hub.add("datasets", block["repo_id"], datasets.CLEANED_AT, {"longmemeval_s_cleaned.json": DATA})
    assert download_dataset(hub, tmp_path, block).returncode == 0


def test_a_hub_that_accepts_and_never_answers_the_revision_lookup_is_named_within_the_timeout(hub, tmp_path):
    """Issue 39: HfApi().dataset_info waited for ever on a server that accepted the connection
    and sent nothing. Every hub request has a timeout; the error names the URL and the fix."""
    hub.add("datasets", "xiaowu0162/longmemeval", PAPER_AT, {"longmemeval_m": DATA})
    hub.silent.add("/api/")
    started = time.monotonic()
    proc = download_dataset(hub, tmp_path, datasets.resolve({"preset": "m"}), limits=("1", "60"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert time.monotonic() - started < 30
    url = f"{hub.endpoint}/api/datasets/xiaowu0162/longmemeval/revision/{PAPER_AT}"
    assert f"no answer from {url} within 1 s (dataset xiaowu0162/longmemeval/longmemeval_m" in proc.stderr
    assert f"is HF_ENDPOINT ({hub.endpoint}) the hub or a mirror that answers?" in proc.stderr
    assert "raise download.timeout" in proc.stderr and "set dataset.path" in proc.stderr


def test_a_file_request_never_answered_is_named_once_not_retried(hub, tmp_path):
    """No answer at all to the file's request: one timeout, then the named error (the retries
    are for transfers cut mid-body, which resume)."""
    hub.add("datasets", "xiaowu0162/longmemeval", PAPER_AT, {"longmemeval_m": DATA})
    hub.silent.add("/cdn/")
    block = {**datasets.resolve({"preset": "m"}), "sha256": sha(DATA), "size": len(DATA)}
    proc = download_dataset(hub, tmp_path, block, limits=("1", "60"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"no answer from {hub.endpoint}/cdn/{sha(DATA)}?filename=longmemeval_m within 1 s" in proc.stderr
    assert len([r for r in hub.requests if r[1].startswith("/cdn/")]) == 1


def test_a_transfer_that_trickles_stops_at_the_stall_limit_and_the_rerun_resumes(hub, tmp_path):
    """Issue 39: one byte now and then keeps every read inside its timeout, so only a limit on
    progress stops the transfer; its bytes are kept and the rerun continues from them."""
    hub.add("datasets", "xiaowu0162/longmemeval", PAPER_AT, {"longmemeval_m": DATA})
    hub.trickle["longmemeval_m"] = (50_000, 0.1)
    block = {**datasets.resolve({"preset": "m"}), "sha256": sha(DATA), "size": len(DATA)}
    started = time.monotonic()
    proc = download_dataset(hub, tmp_path, block, limits=("5", "1"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert time.monotonic() - started < 30
    url = f"{hub.endpoint}/datasets/xiaowu0162/longmemeval/resolve/{PAPER_AT}/longmemeval_m"
    part = tmp_path / "dl/longmemeval_m.part"
    kept = part.stat().st_size
    assert 50_000 < kept < len(DATA)
    assert (
        f"the transfer of dataset xiaowu0162/longmemeval/longmemeval_m at {PAPER_AT} from {url} stalled: "
        f"less than 1 MB in 1 s; the {kept} bytes received are kept in {part}"
    ) in proc.stderr
    assert "the transfer resumes where it stopped" in proc.stderr and "raise download.stall_timeout" in proc.stderr
    del hub.trickle["longmemeval_m"]
    assert download_dataset(hub, tmp_path, block).returncode == 0
    assert [r[2] for r in hub.requests if r[1].startswith("/cdn/")] == [None, f"bytes={kept}-"]
    assert (tmp_path / "dl/longmemeval_m").read_bytes() == DATA


# ---------------------------------------------------------------- the model


def model_files(tiny_model: Path) -> dict[str, bytes]:
    return {
        ("onnx/model.onnx" if p.name == "model.onnx" else p.name): p.read_bytes()
        for p in tiny_model.iterdir()
        if p.is_file() and not p.name.startswith(".")
    }


def download_model(hub, tmp_path, repo_id, revision, limits=LIMITS) -> subprocess.CompletedProcess:
    pins = [a for name, h in models.pins(repo_id, revision).items() for a in ("--sha256", f"{name}={h}")]
    return run(
        hub,
        tmp_path,
        "download-model",
        "--repo-id",
        repo_id,
        "--revision",
        revision,
        "--file",
        "onnx/model.onnx",
        "--pooling",
        "mean",
        *pins,
        "--timeout",
        limits[0],
        "--stall-timeout",
        limits[1],
        "--dest",
        str(tmp_path / "model"),
        "--fingerprint-out",
        str(tmp_path / "model.json"),
    )


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from support.tinymodel import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def test_bge_smalls_files_are_checked_against_their_pins(hub, tmp_path, tiny_model):
    """Other bytes under bge-small's name at its pinned commit are refused, naming the file."""
    hub.add("models", *BGE, model_files(tiny_model))
    proc = download_model(hub, tmp_path, *BGE)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"pinned {models.PINS[BGE]['onnx/model.onnx']}" in proc.stderr and "onnx/model.onnx of model" in proc.stderr
    assert not (tmp_path / "model/onnx/model.onnx").exists() and not (tmp_path / "model.json").exists()


def test_an_unpinned_model_is_fetched_whole_and_fingerprinted(hub, tmp_path, tiny_model):
    files = model_files(tiny_model)
    files.pop("special_tokens_map.json", None)  # an optional file the repository lacks
    hub.add("models", "me/tiny", "c" * 40, files)
    proc = download_model(hub, tmp_path, "me/tiny", "main")
    assert proc.returncode == 0, proc.stderr
    fingerprint = json.loads((tmp_path / "model.json").read_text())
    assert fingerprint["files"]["onnx/model.onnx"] == sha(files["onnx/model.onnx"])
    assert fingerprint["files"]["tokenizer.json"] == sha(files["tokenizer.json"])
    assert (tmp_path / "model/tokenizer.json").read_bytes() == files["tokenizer.json"]
    assert ("GET", "/api/models/me/tiny/revision/main", None) in hub.requests
    assert all(f"/resolve/{'c' * 40}/" in r[1] for r in hub.requests if "/resolve/" in r[1])


def test_the_models_revision_lookup_never_answered_is_named_within_the_timeout(hub, tmp_path):
    hub.add("models", *BGE, {"onnx/model.onnx": b"x"})
    hub.silent.add("/api/")
    proc = download_model(hub, tmp_path, *BGE, limits=("1", "60"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert (
        f"no answer from {hub.endpoint}/api/models/{BGE[0]}/revision/{BGE[1]} within 1 s (model {BGE[0]}" in proc.stderr
    )
    assert "set model.path" in proc.stderr


def test_download_without_network_says_what_to_do(tmp_path, monkeypatch):
    from vipune_eval.errors import EvalError
    from vipune_eval.stages import download as download_stage

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        EvalError, match=r"cannot download the dataset xiaowu0162/longmemeval/x.json at main.*set dataset.path"
    ):
        download_stage.download_dataset(
            "xiaowu0162/longmemeval",
            "x.json",
            "main",
            None,
            tmp_path / "d",
            tmp_path / "fp",
            limits=download_stage.HubLimits(60, 120),
        )
    with pytest.raises(EvalError, match=r"cannot download the model BAAI/bge-small-en-v1.5 at abc.*set model.path"):
        download_stage.download_model(
            "BAAI/bge-small-en-v1.5",
            "abc",
            "onnx/model.onnx",
            "mean",
            tmp_path / "m",
            tmp_path / "fp",
            limits=download_stage.HubLimits(60, 120),
        )
