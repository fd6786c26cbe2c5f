"""registry/models.py: the model pins, and what the report says about a model's files against them
(where they came from, whether they are the pinned bytes; the download's own check:
tests/unit/stages/test_download.py)."""

from __future__ import annotations

from vipune_eval.registry.models import PINS, against_pins, pins, provenance
from vipune_eval.vipune.contract import EMBED_MODEL_ID, EMBED_MODEL_REVISION

PINNED = pins(EMBED_MODEL_ID, EMBED_MODEL_REVISION)


def fingerprint(onnx_sha: str, repo_id: str = EMBED_MODEL_ID) -> dict:
    files = {"model.onnx": onnx_sha, "tokenizer.json": PINNED["tokenizer.json"]}
    rev = EMBED_MODEL_REVISION
    return {"kind": "model", "repo_id": repo_id, "revision": rev, "file": "model.onnx", "files": files}


def test_an_unpinned_model_has_no_pins_and_the_pins_are_a_copy():
    assert pins("other/model", "r") == {} and against_pins("other/model", "r", "model.onnx", {}) is None
    pins(EMBED_MODEL_ID, EMBED_MODEL_REVISION).clear()
    assert pins(EMBED_MODEL_ID, EMBED_MODEL_REVISION) == PINNED == PINS[(EMBED_MODEL_ID, EMBED_MODEL_REVISION)]


def test_the_run_onnx_file_stands_for_the_pinned_one_wherever_it_lies():
    check = against_pins(EMBED_MODEL_ID, EMBED_MODEL_REVISION, "model.onnx", {"model.onnx": "ab"})
    assert check == {
        "onnx/model.onnx": {"pinned": PINNED["onnx/model.onnx"], "found": "ab"},
        "tokenizer.json": {"pinned": PINNED["tokenizer.json"], "found": None},
    }


def test_the_provenance_says_where_the_files_came_from_and_whether_they_are_the_pinned_bytes():
    local = provenance(fingerprint(PINNED["onnx/model.onnx"]), "/models/bge")
    assert (local["source"], local["path"], local["pinned"]) == ("local", "/models/bge", True)
    assert local["files"]["model.onnx"] == PINNED["onnx/model.onnx"]  # the fingerprint's keys, kept
    other = provenance(fingerprint("00" * 32), None)
    assert (other["source"], other["path"], other["pinned"]) == ("download", None, False)
    assert other["pins"]["onnx/model.onnx"] == {"pinned": PINNED["onnx/model.onnx"], "found": "00" * 32}
    unpinned = provenance(fingerprint("00" * 32, "other/model"), None)
    assert unpinned["pinned"] is None and unpinned["pins"] is None
