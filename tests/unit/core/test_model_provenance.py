"""core/model_provenance.py: report.json's provenance.model has the keys its shape declares, as
registry.models.provenance writes it, pinned or not (a TypedDict is not checked when report.json is
read back)."""

from __future__ import annotations

import pytest

from vipune_eval.core.model_provenance import ModelProvenance, Pin
from vipune_eval.registry.models import pins, provenance
from vipune_eval.vipune.contract import EMBED_MODEL_ID, EMBED_MODEL_REVISION


@pytest.mark.parametrize("repo_id", [EMBED_MODEL_ID, "other/model"])
def test_the_provenance_has_the_declared_keys(repo_id):
    files = {"model.onnx": pins(EMBED_MODEL_ID, EMBED_MODEL_REVISION)["onnx/model.onnx"]}
    model = {"kind": "model", "repo_id": repo_id, "revision": EMBED_MODEL_REVISION, "file": "model.onnx"}
    model |= {"files": files, "pooling": "mean", "normalization": "l2"}
    found = provenance(model, None)
    assert set(found) == set(ModelProvenance.__annotations__)
    assert all(set(pin) == set(Pin.__annotations__) for pin in (found["pins"] or {}).values())
    assert (found["pins"] is None) == (repo_id != EMBED_MODEL_ID)
