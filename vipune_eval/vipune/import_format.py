"""vipune's import format: the JSONL a persona's database is seeded from.

A header (both ``version``, read by older importers, and ``format_version``, written by newer
exporters; the model vipune is configured with, or the import is refused), then one row per
memory with its precomputed embedding as base64 of little-endian float32
(docs/vipune-contract.md).
"""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone

import numpy as np

from vipune_eval.core.persona import Persona
from vipune_eval.vipune.contract import EMBED_MODEL_ID, EMBED_MODEL_REVISION


def embedding_b64(vector: np.ndarray) -> str:
    return base64.b64encode(np.asarray(vector, "<f4").tobytes()).decode("ascii")


def import_lines(persona: Persona) -> list[str]:
    """The import JSONL: a header (both ``version`` and ``format_version``), then one row each."""
    dims = persona.vectors.shape[1]
    header = {"type": "export", "version": 1, "format_version": 1, "embedding_dims": dims,
              "model_id": EMBED_MODEL_ID, "model_revision": EMBED_MODEL_REVISION,
              "exported_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "rows": len(persona.row_ids)}
    lines = [json.dumps(header)]
    for rid, text, vector, created in zip(persona.row_ids, persona.texts, persona.vectors,
                                          persona.created_at):
        lines.append(json.dumps({
            "id": rid, "project_id": persona.question_id, "content": text, "metadata": None,
            "embedding": embedding_b64(vector), "created_at": created, "updated_at": created,
            "memory_type": "fact", "status": "active", "superseded_by": None,
            "retrieval_count": 0, "last_retrieved_at": None, "importance": "medium",
        }, ensure_ascii=False))
    return lines
