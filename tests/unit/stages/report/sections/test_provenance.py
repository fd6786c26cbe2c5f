"""stages/report/sections/provenance.py: what was scored, a line each."""

from __future__ import annotations

import pytest

from support.report import markdown_of
from vipune_eval.registry.models import PINS
from vipune_eval.stages.report.report import build
from vipune_eval.vipune.contract import EMBED_MODEL_ID, EMBED_MODEL_REVISION

BGE, BGE_AT = EMBED_MODEL_ID, EMBED_MODEL_REVISION
AS = f"{BGE}@{BGE_AT[:12]}"  # as the report names the model
ONNX = PINS[BGE, BGE_AT]["onnx/model.onnx"][:12]  # its pinned ONNX file, as the report names it


@pytest.mark.parametrize(
    "path, onnx, pinned, words",
    [
        # issue 36 item 6: a local folder of other bytes laid out as bge-small says they are not its pinned ones
        (
            "/models/minilm",
            "003dfe404dce" + "0" * 52,
            False,
            f"model: files from /models/minilm laid out as {AS} `model.onnx` (sha256 "
            f"003dfe404dce), mean pooling + L2: not the pinned bytes of {AS} (pinned: "
            f"`onnx/model.onnx` sha256 {ONNX}): numbers are not comparable with runs on the pinned model",
        ),
        (
            "/models/bge",
            None,
            True,
            f"model: files from /models/bge laid out as {AS} `model.onnx` (sha256 "
            f"{ONNX}), mean pooling + L2: the pinned bytes of {AS}",
        ),
        (
            None,
            None,
            True,
            f"model: {AS} `model.onnx` (sha256 {ONNX}), downloaded, mean pooling + L2: the pinned bytes of {AS}",
        ),
    ],
)
def test_the_model_line_says_whether_the_files_are_the_pinned_bytes(loaded, path, onnx, pinned, words):
    """Issues 36 item 6 and 39 item 6: report.md's model line and provenance.model say where the
    files came from and whether they are the pinned bytes of the model they are laid out as."""
    from support.report import summary_of
    from vipune_eval.registry.models import pins

    pinned_files = pins(BGE, BGE_AT)
    loaded.model = {
        "kind": "model",
        "repo_id": BGE,
        "revision": BGE_AT,
        "file": "model.onnx",
        "pooling": "mean",
        "files": {
            "model.onnx": onnx or pinned_files["onnx/model.onnx"],
            "tokenizer.json": pinned_files["tokenizer.json"],
        },
    }
    loaded.config = {"model": {"path": path}}
    report = build(loaded)
    model = report["provenance"]["model"]
    assert (model["source"], model["path"], model["pinned"]) == ("local" if path else "download", path, pinned)
    assert model["pins"]["onnx/model.onnx"] == {
        "pinned": pinned_files["onnx/model.onnx"],
        "found": model["files"]["model.onnx"],
    }
    assert f"- {words}\n" in markdown_of(report)
    assert summary_of(report).splitlines()[1] == f"  {words.replace('`', '')}"  # the summary's first lines


def test_a_model_with_no_pins_says_its_bytes_are_not_checked(loaded):
    report = build(loaded)
    assert report["provenance"]["model"]["pinned"] is None and report["provenance"]["model"]["pins"] is None
    assert (
        "- model: files from /models/x laid out as m/x@rrrrrrrrrrrr `model.onnx` (sha256 cdcdcdcdcdcd), mean "
        "pooling + L2: m/x@rrrrrrrrrrrr has no pins, so these bytes are recorded, not checked\n"
    ) in markdown_of(report)


def test_the_summary_opens_with_the_vipune_build_the_model_and_the_data(loaded):
    """Issue 39 item 6: summary.txt's first lines name the vipune build (version and fingerprint
    id, where it came from), the model and the data by what they are; report.md's lines too."""
    from support.report import summary_of

    primary = "0.20.1-aaaaaaaaaaaa"
    loaded.manifest.update(
        primary=primary,
        corpus={
            "preset": None,
            "release": "local",
            "source": "the local file lme.json",
            "sha256": "ab" * 32,
            "note": "a local file that is none of the pinned releases",
        },
    )
    loaded.sources = {primary: "vipune.binary 'vipune' = /usr/local/bin/vipune"}
    loaded.fingerprints = {primary: {"id": primary, "version": "0.20.1", "sha256": "aa" * 32}}
    loaded.preflights = {primary: {}}
    report = build(loaded)
    lines = summary_of(report).splitlines()
    assert lines[1:4] == [
        "  vipune 0.20.1, build 0.20.1-aaaaaaaaaaaa, from vipune.binary 'vipune' = /usr/local/bin/vipune",
        "  model: files from /models/x laid out as m/x@rrrrrrrrrrrr model.onnx (sha256 cdcdcdcdcdcd), mean pooling + "
        "L2: m/x@rrrrrrrrrrrr has no pins, so these bytes are recorded, not checked",
        "  corpus: local (the local file lme.json, sha256 abababababab…): a local file that is none of the pinned releases",
    ]
    assert (
        f"- vipune 0.20.1 (binary sha256 {'aa' * 32}; the contract was checked against {report['provenance']['contract_release']})"
        f": build {primary}, from vipune.binary 'vipune' = /usr/local/bin/vipune\n"
    ) in markdown_of(report)
    loaded.manifest.update(corpus=None)  # no corpus block: the dataset's line names the data
    assert summary_of(build(loaded)).splitlines()[3] == "  dataset local file lme.json (sha256 abababababab): 8 pairs"


def test_a_fast_lane_and_a_copy_its_source_changes_are_named_in_the_summary_and_report(loaded):
    """Issue 43: a fast build says so wherever the vipune-lane is named, and a copied vipune item that the
    source changes is a warning: vipune-lib's numbers do not follow that edit."""
    from support.report import summary_of

    primary = "0.20.2-aaaaaaaaaaaa"
    loaded.manifest.update(primary=primary)
    loaded.fingerprints = {primary: {"id": primary, "version": "0.20.2", "sha256": "aa" * 32}}
    copy = {
        "file": "src/commands/handlers.rs",
        "item": "fn handle_search",
        "what": "the search command's call",
        "copied_to": "lane/src/copies.rs: search_as_the_command",
        "pinned": "1" * 64,
        "source": "2" * 64,
        "same": False,
    }
    same = {**copy, "file": "src/main.rs", "item": "fn main", "source": "1" * 64, "same": True}
    whole = {**copy, "file": "src/commands/import.rs", "item": None, "what": "the import"}  # a file pinned whole
    lane = {
        "id": "0.20.2-cccccccccccc",
        "sha256": "cc" * 32,
        "version": "0.20.2",
        "binary": primary,
        "built": {
            "vipune_source": "checkout /src/vipune (abc123)",
            "profile": "fast",
            "sources": {"compiled": [], "copies": [copy, same, whole]},
        },
    }
    loaded.lanes = {primary: lane}
    report = build(loaded)
    text, md = summary_of(report), markdown_of(report)
    assert "- vipune-lib copies src/commands/import.rs, which this source changes (the import; " in md
    named = (
        "vipune-lib copies `fn handle_search` from src/commands/handlers.rs, which this source changes (the "
        "search command's call; the copy: lane/src/copies.rs: search_as_the_command): a stale copy: the "
        "binary runs this source's edit there, vipune-lib the code it copied, so its numbers do not follow "
        "that edit"
    )
    assert f"  ! {named.replace('`', '')}" in text and f"- {named}" in md and "fn main" not in text
    fast = "a fast build (build.sh --fast: not the release profile's bytes, the same rankings)"
    assert fast in text and fast in md
    loaded.lanes = {
        primary: {
            **lane,
            "built": {**lane["built"], "profile": "release", "sources": {"compiled": [], "copies": [same]}},
        }
    }
    report = build(loaded)
    assert "vipune-lib copies" not in summary_of(report) and "fast build" not in markdown_of(report)
