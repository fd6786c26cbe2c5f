"""Datasets as presets (issue 21): one key chooses the release and file, each preset carries its
expected counts, the report names the corpus, and the download says how to pin it."""

import pytest
import yaml

from support.scenarios import REPO
from vipune_eval.errors import EvalError
from vipune_eval.registry import datasets


@pytest.mark.parametrize(
    "preset,repo,filename,release",
    [
        ("m", "xiaowu0162/longmemeval", "longmemeval_m", "original"),
        ("s", "xiaowu0162/longmemeval", "longmemeval_s", "original"),
        ("oracle", "xiaowu0162/longmemeval", "longmemeval_oracle", "original"),
        ("m-cleaned", "xiaowu0162/longmemeval-cleaned", "longmemeval_m_cleaned.json", "cleaned"),
        ("s-cleaned", "xiaowu0162/longmemeval-cleaned", "longmemeval_s_cleaned.json", "cleaned"),
        ("oracle-cleaned", "xiaowu0162/longmemeval-cleaned", "longmemeval_oracle.json", "cleaned"),
    ],
)
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
    assert (block["repo_id"], block["filename"]) == ("xiaowu0162/longmemeval", "longmemeval_m")
    assert block["expected"] == {"instances": 500, "abstention": 30, "pairs": 470}
    s = yaml.safe_load((REPO / "config/longmemeval_s.yaml").read_text())
    assert datasets.resolve({**config["dataset"], **s["dataset"]})["filename"] == "longmemeval_s"


def test_an_unknown_preset_is_refused_listing_the_known():
    with pytest.raises(EvalError) as info:
        datasets.resolve({"preset": "l"})
    assert "'l'" in str(info.value) and "m, s, oracle, m-cleaned" in str(info.value)


def test_a_custom_file_of_a_known_release_is_recognised():
    block = datasets.resolve(
        {"preset": "m", "filename": "longmemeval_s_cleaned.json", "repo_id": "xiaowu0162/longmemeval-cleaned"}
    )
    assert datasets.corpus(block)["preset"] == "s-cleaned"
    other = datasets.resolve({"preset": "m", "repo_id": "me/mirror"})
    assert datasets.corpus(other)["release"] == "custom"


def test_prepare_resolves_the_block_the_rules_read(tmp_path, monkeypatch):
    from support.config import SCHEMA
    from vipune_eval.plan import manifest, workspace

    monkeypatch.chdir(tmp_path)
    config = {
        "retrievers": ["dense"],
        "ks": [1],
        "search_limit": 10,
        "dataset": {"preset": "oracle-cleaned", "path": None, "sha256": None},
        "model": {"path": None},
        "granularities": ["session"],
        "embed": {"shards": 1},
        "search": {"row_limit": 100, "shards": 1},
        "split": {"seed": 0, "dev_fraction": 0.2},
    }
    ws = workspace.prepare(config, SCHEMA)
    assert config["dataset"]["filename"] == "longmemeval_oracle.json"
    assert ws.dataset_file.endswith("/download/longmemeval_oracle.json")
    assert manifest.report_manifest(ws)["corpus"]["release"] == "cleaned"


def test_each_preset_is_pinned_to_a_commit_and_its_bytes():
    """The pins as the hub serves the files (issue 30): the paper's repository without an
    extension, each file's commit, sha256 and (where recorded) size; the oracle's two releases
    are the same bytes."""
    m = datasets.resolve({"preset": "m"})
    assert (m["filename"], m["revision"], m["sha256"], m["size"]) == (
        "longmemeval_m",
        "2ec2a557f339b6c0369619b1ed5793734cc87533",
        "fb5413e3b077c62927daab794836991a2fcfa61ceacab57dc679fb02daaff2d9",
        2_745_274_681,
    )
    for name, preset in datasets.PRESETS.items():
        assert len(preset.revision) == 40 and len(preset.sha256) == 64, name
        assert preset.filename.endswith(".json") == (preset.repo_id == datasets.CLEANED), name
    assert datasets.PRESETS["oracle"].sha256 == datasets.PRESETS["oracle-cleaned"].sha256


def test_a_config_naming_another_revision_or_file_does_not_inherit_the_presets_pins():
    main = datasets.resolve({"preset": "m", "revision": "main"})
    assert main["revision"] == "main" and main["sha256"] is None and main["size"] is None
    mine = datasets.resolve({"preset": "m", "revision": "main", "sha256": "ab" * 32})
    assert mine["sha256"] == "ab" * 32 and mine["size"] is None
    assert datasets.resolve({"preset": "m", "repo_id": "me/mirror"})["sha256"] is None


def test_a_local_file_is_identified_by_its_bytes_not_by_the_preset(tmp_path):
    """Issue 32, case 1: a generated 8-instance file under the default preset was labelled the
    paper's LongMemEval_M and held to its 500/30/470 counts; now only the preset's own bytes are."""
    other = datasets.resolve({"preset": "m", "path": str(tmp_path / "lme.json")}, local_sha256="00" * 32)
    assert other["expected"] is None and other["sha256"] is None
    corpus = datasets.corpus(other, "00" * 32)
    assert corpus["release"] == "local" and corpus["preset"] is None and not corpus["same_as_paper"]
    assert "none of the pinned releases" in corpus["note"] and corpus["sha256"] == "00" * 32
    assert corpus["source"] == "the local file lme.json" and corpus["repo_id"] is None  # not the preset's repository
    m_bytes = datasets.PRESETS["m"].sha256
    same = datasets.resolve({"preset": "s", "path": "x"}, local_sha256=m_bytes)
    assert datasets.corpus(same, m_bytes)["preset"] == "m" and datasets.corpus(same, m_bytes)["same_as_paper"]
    assert same["expected"] is None  # the preset says s, the bytes are m's: s's counts are not expected
    mine = {"instances": 8, "abstention": 0, "pairs": 8}
    assert datasets.resolve({"preset": "m", "path": "x", "expected": mine}, local_sha256="00" * 32)["expected"] == mine


def test_only_the_papers_corpus_is_set_beside_its_published_figures():
    from vipune_eval.stages.report.published import beside_published

    entry = {"metrics": {"recall_all@5": 0.5, "recall_all@10": 0.6, "ndcg_any@5": 0.4, "ndcg_any@10": 0.45}, "pairs": 8}
    local = datasets.corpus(datasets.resolve({"preset": "m", "path": "x"}, local_sha256="00" * 32), "00" * 32)
    assert beside_published({"bm25-lme": entry}, local) == {}
    paper = datasets.corpus(datasets.resolve({"preset": "m"}))
    assert set(beside_published({"bm25-lme": entry}, paper)) == {"BM25 (rank_bm25)"}
