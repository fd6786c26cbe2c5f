"""The embedding model a job loads: its folder, the ONNX file in it and the pooling (vipune's
recipe: mean, then L2). Shared by the embed stage, which loads it (stages.embed.embed.load_model),
and the preflight, which checks that vipune embeds as it does; built by the CLI from the options
every model command shares. No imports: an edit of how the model is loaded reruns nothing that
only names it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ModelFiles:
    model_dir: Path
    file: str
    pooling: str

    def __str__(self) -> str:
        return f"{self.model_dir / self.file} with {self.pooling} pooling + L2"
