"""preflight: a binary that honours the contract passes, on the fake and the real vipune; one
that breaks it is refused naming the check (or, under record, its drift is named for what it is);
a different model in vipune's cache fails the embedding parity."""

import json
import os

import pytest

from vipune_eval.core.model_files import ModelFiles
from vipune_eval.errors import EvalError
from vipune_eval.stages.search.preflight import run_preflight
from vipune_eval.vipune.binary import binary_fingerprint
from vipune_eval.vipune.release import RELEASE
from vipune_eval.vipune.settings import VipuneSettings


def preflight(binary, hf_home, model_dir, tmp_path, mode="enforce", **env):
    fingerprint = tmp_path / "fp.json"
    os.environ.update(env)
    try:
        fingerprint.write_text(json.dumps(binary_fingerprint(binary, 30)))
        vipune = VipuneSettings(str(binary), fingerprint, hf_home, tmp_path / "tmp", timeout=30)
        return run_preflight(vipune, ModelFiles(model_dir, "model.onnx", "mean"), tmp_path / "preflight.json", mode)
    finally:
        for key in env:
            del os.environ[key]


def test_preflight_passes_on_a_faithful_binary(any_vipune, vipune_hf_home, vipune_tiny_model_dir, tmp_path):
    findings = preflight(any_vipune, vipune_hf_home, vipune_tiny_model_dir, tmp_path)
    assert findings["embedding_parity"]["min_cosine"] > 0.999
    assert findings["query_embedding_parity"]["min_cosine"] > 0.999  # its search's query vectors too
    checks = {c["check"] for c in findings["checks"]}
    assert {
        "rrf_k25_ranks_from_1",
        "bm25_is_and_of_every_word",
        "candidate_pool_at_least_50",
        "candidate_pool_10x_limit",
        "semantic_ties_newer_then_import_order",
        "query_over_512_tokens_exits_3",
        "limit_over_10000_refused",
    } <= checks
    assert all(c["passed"] for c in findings["checks"])
    assert (tmp_path / "preflight.json").exists() and not (tmp_path / "tmp").exists()


@pytest.mark.parametrize(
    "fault, message",
    [
        ("no-import", rf"vipune {RELEASE} has no import or export command.*cargo install vipune"),
        ("cls-pooling", r"embedding parity failed.*model.onnx with mean pooling"),
        (
            "rrf-k60",
            r"check 'rrf_k25_ranks_from_1' failed: RRF k differs: same order, other scores \(vipune's "
            r"fused scores fit k = 60; .*expected .*preflight-rrf::002 0.074",
        ),
        ("bm25-or", r"check 'bm25_is_and_of_every_word' failed"),
        (
            "query-prefix",
            r"check 'query_embedding_parity' failed: the query's embedding differs: vipune embeds a "
            r"search's query with cosine 0\.\d+ \(< 0\.999\) to the cached query vectors",
        ),
        ("pool-all", r"check 'candidate_pool_10x_limit_and_fused_ties_to_smaller_id' failed"),
        (
            "ties-by-id",
            r"check 'semantic_ties_newer_then_import_order' failed: expected "
            r"\['preflight-ties::c', 'preflight-ties::b', 'preflight-ties::a'\], seen "
            r"\['preflight-ties::b', 'preflight-ties::c', 'preflight-ties::a'\]",
        ),
    ],
)
def test_preflight_refuses_a_binary_that_breaks_the_contract(
    fake_vipune_bin, vipune_hf_home, vipune_tiny_model_dir, tmp_path, fault, message
):
    with pytest.raises(EvalError, match=message):
        preflight(fake_vipune_bin, vipune_hf_home, vipune_tiny_model_dir, tmp_path, FAKE_VIPUNE_FAULT=fault)
    assert not (tmp_path / "preflight.json").exists()


@pytest.mark.parametrize(
    "fault, failed, drift",
    [
        # Only the fused scores differ: one finding, in words; the AND and pool checks pass at k = 60.
        (
            "rrf-k60",
            ["rrf_k25_ranks_from_1"],
            [
                "RRF k differs: same order, other scores (vipune's fused "
                "scores fit k = 60; the contract and the hybrid mirrors use k = 25)"
            ],
        ),
        ("bm25-or", ["bm25_is_and_of_every_word"], ["bm25_is_and_of_every_word"]),
        # Only the query's embedding differs (an edit of prefix_input): the fusion probes still rank as known.
        (
            "query-prefix",
            ["query_embedding_parity"],
            [
                "the query's embedding differs: vipune embeds a search's query "
                "with cosine {cosine:.4f} (< 0.999) to the cached query vectors, "
                "which are embedded as passages are (bge-small has no query "
                "prefix); the binary's searches measure its new query embedding, "
                "the lib lane's, on the cached vectors, do not"
            ],
        ),
    ],
)
def test_recorded_drift_is_named_for_what_it_is(
    fake_vipune_bin, vipune_hf_home, vipune_tiny_model_dir, tmp_path, fault, failed, drift
):
    findings = preflight(
        fake_vipune_bin, vipune_hf_home, vipune_tiny_model_dir, tmp_path, "record", FAKE_VIPUNE_FAULT=fault
    )
    cosine = findings["query_embedding_parity"]["min_cosine"]
    assert (findings["failed_checks"], findings["drift"]) == (failed, [d.format(cosine=cosine) for d in drift])


def test_preflight_catches_a_different_model_in_vipunes_cache(fake_vipune_bin, tmp_path, vipune_tiny_model_dir):
    from support.tinymodel import build_tiny_model
    from vipune_eval.vipune.contract import EMBED_MODEL_ID, EMBED_MODEL_REVISION
    from vipune_eval.vipune.home import build_vipune_hf_home

    other = build_tiny_model(tmp_path / "other", seed=9)
    home = build_vipune_hf_home(other, "model.onnx", EMBED_MODEL_ID, EMBED_MODEL_REVISION, tmp_path / "home")
    with pytest.raises(EvalError, match="embedding parity failed"):
        preflight(fake_vipune_bin, home, vipune_tiny_model_dir, tmp_path)


def test_a_binary_rebuilt_while_its_preflight_runs_is_not_what_the_later_checks_run(
    tmp_path, vipune_hf_home, vipune_tiny_model_dir, monkeypatch
):
    """Issue 51 item 1: the checks after the rebuild (here the fusion probes, after the parity
    check) run the job's private copy of the planned bytes, so the findings filed under the
    planned fingerprint are the planned binary's; a rebuild to RRF k = 60 would fail them."""
    from support.fakes import fake_build
    from vipune_eval.stages.search import preflight as stage

    binary, _ = fake_build(tmp_path / "build")
    k60 = fake_build(tmp_path / "k60", preamble="export FAKE_VIPUNE_FAULT=rrf-k60\n")[0].read_text()
    shipped = stage.check_parity

    def parity_then_rebuild(*args, **kwargs):
        shipped(*args, **kwargs)
        part = binary.with_name("vipune.part")
        part.write_text(k60)
        part.chmod(0o755)
        os.replace(part, binary)  # `build.sh --checkout` in another terminal

    monkeypatch.setattr(stage, "check_parity", parity_then_rebuild)
    findings = preflight(binary, vipune_hf_home, vipune_tiny_model_dir, tmp_path)
    assert findings["follows_contract"] and binary.read_text() == k60
