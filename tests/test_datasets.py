"""Datasets as presets (issue 21): one key chooses the release and file, each preset carries its
expected counts, the report names the corpus, and the download says how to pin it."""

import logging
from pathlib import Path

import pytest
import yaml

from vipune_eval.registry import datasets
from vipune_eval.stages import download as download_stage
from vipune_eval.errors import EvalError

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("preset,repo,filename,release", [
    ("m", "xiaowu0162/longmemeval", "longmemeval_m.json", "original"),
    ("s", "xiaowu0162/longmemeval", "longmemeval_s.json", "original"),
    ("oracle", "xiaowu0162/longmemeval", "longmemeval_oracle.json", "original"),
    ("m-cleaned", "xiaowu0162/longmemeval-cleaned", "longmemeval_m_cleaned.json", "cleaned"),
    ("s-cleaned", "xiaowu0162/longmemeval-cleaned", "longmemeval_s_cleaned.json", "cleaned"),
    ("oracle-cleaned", "xiaowu0162/longmemeval-cleaned", "longmemeval_oracle.json", "cleaned"),
])
def test_a_preset_names_its_release_and_file(preset, repo, filename, release):
    block = datasets.resolve({"preset": preset, "repo_id": None, "filename": None, "path": None})
    assert (block["repo_id"], block["filename"]) == (repo, filename)
    corpus = datasets.corpus(block)
    assert corpus["release"] == release and corpus["preset"] == preset
    assert ("not directly comparable" in corpus["note"]) == (release == "cleaned")


def test_expected_counts_come_from_the_preset_unless_set():
    assert datasets.resolve({"preset": "m"})["expected"] == {"instances": 500, "abstention": 30, "pairs": 470}
    assert datasets.resolve({"preset": "m-cleaned"})["expected"] is None
    assert datasets.resolve({"preset": "m", "expected": None})["expected"] is None
    mine = {"instances": 6, "abstention": 1, "pairs": 5}
    assert datasets.resolve({"preset": "s", "expected": mine})["expected"] == mine


def test_the_default_config_is_the_m_preset_as_before():
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    block = datasets.resolve(config["dataset"])
    assert (block["repo_id"], block["filename"]) == ("xiaowu0162/longmemeval", "longmemeval_m.json")
    assert block["expected"] == {"instances": 500, "abstention": 30, "pairs": 470}
    s = yaml.safe_load((REPO / "config/s.yaml").read_text())
    assert datasets.resolve({**config["dataset"], **s["dataset"]})["filename"] == "longmemeval_s.json"


def test_an_unknown_preset_is_refused_listing_the_known():
    with pytest.raises(EvalError) as info:
        datasets.resolve({"preset": "l"})
    assert "'l'" in str(info.value) and "m, s, oracle, m-cleaned" in str(info.value)


def test_a_custom_file_of_a_known_release_is_recognised():
    block = datasets.resolve({"preset": "m", "filename": "longmemeval_s_cleaned.json",
                              "repo_id": "xiaowu0162/longmemeval-cleaned"})
    assert datasets.corpus(block)["preset"] == "s-cleaned"
    other = datasets.resolve({"preset": "m", "repo_id": "me/mirror"})
    assert datasets.corpus(other)["release"] == "custom"


def test_prepare_resolves_the_block_the_rules_read(tmp_path, monkeypatch):
    from vipune_eval.plan import workspace

    monkeypatch.chdir(tmp_path)
    config = {"retrievers": ["dense"], "ks": [1], "search_limit": 10,
              "dataset": {"preset": "oracle-cleaned", "path": None, "sha256": None},
              "model": {"path": None}, "granularities": ["session"], "embed": {"shards": 1},
              "search": {"row_limit": 100, "shards": 1},
              "split": {"seed": 0, "dev_fraction": 0.2}}
    ws = workspace.prepare(config)
    assert config["dataset"]["filename"] == "longmemeval_oracle.json"
    assert ws.dataset_file.endswith("/download/longmemeval_oracle.json")
    assert workspace.report_manifest(ws)["corpus"]["release"] == "cleaned"


def test_the_download_records_the_commit_and_says_how_to_pin(tmp_path, monkeypatch, caplog):
    """The hub client is replaced by a stand-in serving a local file (tests never touch the network)."""
    import huggingface_hub

    payload = tmp_path / "served.json"
    payload.write_text("[]")

    class Info:
        sha = "0123456789abcdef0123456789abcdef01234567"

    class Api:
        def dataset_info(self, repo_id, revision):
            return Info()

    def download(repo_id, filename, repo_type, revision, local_dir):
        assert revision == Info.sha  # the file is fetched at the resolved commit
        out = Path(local_dir) / filename
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(payload.read_bytes())
        return str(out)

    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    with caplog.at_level(logging.INFO, logger="vipune_eval"):
        fp = download_stage.download_dataset("xiaowu0162/longmemeval", "longmemeval_s.json", "main", None,
                                      tmp_path / "dl", tmp_path / "fp.json")
    assert fp["resolved_commit"] == Info.sha and len(fp["sha256"]) == 64
    assert f"dataset.revision: {Info.sha}" in caplog.text and f"dataset.sha256: {fp['sha256']}" in caplog.text
    with pytest.raises(EvalError, match="sha256 mismatch"):
        download_stage.download_dataset("xiaowu0162/longmemeval", "longmemeval_s.json", Info.sha, "0" * 64,
                                 tmp_path / "dl2", tmp_path / "fp2.json")
