"""The workflow's config schema and the repository's config, as the Snakefile reads them."""

import copy
from pathlib import Path
from typing import Any

import yaml

from support.scenarios import REPO

SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
DEFAULTS = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def defaults() -> dict[str, Any]:
    """A copy of config/config.yaml to change."""
    return copy.deepcopy(DEFAULTS)


def local_config(folder: Path, **vipune: Any) -> dict[str, Any]:
    """The repository's defaults on a stand-in local model folder and data file (written into
    ``folder``: enough for ``prepare``, not for a run), with these vipune keys."""
    model = folder / "model"
    model.mkdir()
    (model / "model.onnx").write_bytes(b"onnx")
    (model / "tokenizer.json").write_text("{}")
    data = folder / "data.json"
    data.write_text("[]")
    cfg = defaults()
    cfg["dataset"]["path"] = str(data)
    cfg["model"].update(path=str(model), file="model.onnx")
    cfg["vipune"].update(vipune)
    return cfg
