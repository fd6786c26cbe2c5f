"""The models' pins: the sha256 of each file of a model repository at a commit, checked when the
model is downloaded (one owner; read at parse time, passed to the download on its command line),
and by the report against the files the run embedded with, wherever they came from (``provenance``).

bge-small-en-v1.5 at the commit vipune's own model pin names (vipune_eval.vipune.contract), as a
public project that downloaded it recorded (docs/configuration.md names it). Another repository or
revision is downloaded unpinned, its hashes recorded in the model's fingerprint.
"""

from __future__ import annotations

from vipune_eval.core.fingerprints import ModelFingerprint
from vipune_eval.core.model_provenance import ModelProvenance, Pin
from vipune_eval.vipune.contract import EMBED_MODEL_ID, EMBED_MODEL_REVISION

PINS: dict[tuple[str, str], dict[str, str]] = {
    (EMBED_MODEL_ID, EMBED_MODEL_REVISION): {
        "onnx/model.onnx": "828e1496d7fabb79cfa4dcd84fa38625c0d3d21da474a00f08db0f559940cf35",
        "tokenizer.json": "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66",
    },
}


def pins(repo_id: str, revision: str) -> dict[str, str]:
    """``file → sha256`` for the model at that revision ({} where nothing is pinned)."""
    return dict(PINS.get((repo_id, revision), {}))


def against_pins(repo_id: str, revision: str, onnx: str, files: dict[str, str]) -> dict[str, Pin] | None:
    """A model's files (``files``: name → sha256, as its fingerprint holds them) against the pins
    of ``repo_id`` at ``revision``: each pinned file with its ``pinned`` sha256 and the one
    ``found`` (None: not among the files); None where nothing is pinned. ``onnx``, the ONNX file
    the run embeds with, stands for the pinned ONNX file wherever it lies in the folder."""
    pinned = pins(repo_id, revision)
    if not pinned:
        return None
    return {
        name: {"pinned": sha, "found": files.get(onnx if name.endswith(".onnx") else name)}
        for name, sha in pinned.items()
    }


def provenance(model: ModelFingerprint, path: str | None) -> ModelProvenance:
    """What the report says about the model (report.json's provenance.model): its fingerprint, where
    its files came from (``source``: the local folder ``path`` the config names, or the download)
    and whether they are the pinned bytes of the model they are laid out as (``pinned``: None where
    that repository and revision have no pins; ``pins``: each pinned file's sha256 beside the one
    found, ``against_pins``)."""
    check = against_pins(model["repo_id"], model["revision"], model["file"], model["files"])
    return {
        **model,
        "source": "local" if path else "download",
        "path": path,
        "pinned": None if check is None else all(p["found"] == p["pinned"] for p in check.values()),
        "pins": check,
    }
