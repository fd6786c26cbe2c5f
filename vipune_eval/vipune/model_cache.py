"""The model where vipune looks for it: an hf-hub cache under the HF_HOME each vipune call gets."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from vipune_eval.core.fingerprints import MODEL_SIDE_FILES


def build_vipune_hf_home(model_dir: Path, file: str, repo_id: str, revision: str, out: Path) -> Path:
    """Lay the model out as an hf-hub cache, the way vipune looks it up offline.

    vipune resolves ``$HF_HOME/hub/models--ORG--NAME/refs/<revision>`` to a snapshot folder and
    reads ``onnx/model.onnx`` (or ``model.onnx``) and ``tokenizer.json`` there. Files are copied,
    not linked, so the layout survives the user's model folder moving.
    """
    home = out
    repo_dir = home / "hub" / ("models--" + repo_id.replace("/", "--"))
    tmp = home.with_name(home.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    snapshot = tmp / repo_dir.relative_to(home) / "snapshots" / revision
    for name in (file, *MODEL_SIDE_FILES):
        if (model_dir / name).is_file():
            (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(model_dir / name, snapshot / name)
    refs = tmp / repo_dir.relative_to(home) / "refs"
    refs.mkdir(parents=True)
    (refs / revision).write_text(revision)
    shutil.rmtree(home, ignore_errors=True)
    os.replace(tmp, home)
    return home
