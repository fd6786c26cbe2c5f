"""vipune-home: the model where vipune looks for it, an hf-hub cache under the HF_HOME each vipune call gets."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from vipune_eval.core.fingerprints import MODEL_SIDE_FILES

# Where vipune's built-in profile has its ONNX file. vipune asks hf-hub for this path first and
# falls back to ``model.onnx`` only after that request failed: a request, so the file goes here
# whatever its name in the model folder.
VIPUNE_ONNX_PATH = "onnx/model.onnx"


def build_vipune_hf_home(model_dir: Path, file: str, repo_id: str, revision: str, out: Path) -> Path:
    """Lay the model out as an hf-hub cache, the way vipune looks it up offline.

    vipune resolves ``$HF_HOME/hub/models--ORG--NAME/refs/<revision>`` to a snapshot folder and
    reads ``onnx/model.onnx`` and ``tokenizer.json`` there without a request. Files are copied,
    not linked, so the layout survives the user's model folder moving.
    """
    home = out
    repo_dir = home / "hub" / ("models--" + repo_id.replace("/", "--"))
    tmp = home.with_name(home.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    snapshot = tmp / repo_dir.relative_to(home) / "snapshots" / revision
    for source, name in ((file, VIPUNE_ONNX_PATH), *((n, n) for n in MODEL_SIDE_FILES)):
        if (model_dir / source).is_file():
            (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(model_dir / source, snapshot / name)
    refs = tmp / repo_dir.relative_to(home) / "refs"
    refs.mkdir(parents=True)
    (refs / revision).write_text(revision)
    shutil.rmtree(home, ignore_errors=True)
    os.replace(tmp, home)
    return home
