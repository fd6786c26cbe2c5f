"""vipune's import format: the JSONL a persona's database is seeded from.

A header (both ``version``, read by older importers, and ``format_version``, written by newer
exporters; the model vipune is configured with, or the import is refused), then one row per
memory with its precomputed embedding as base64 of little-endian float32
(docs/vipune-contract.md).
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from json.encoder import encode_basestring as quoted  # json.dumps(str, ensure_ascii=False)

import numpy as np

from vipune_eval.core.persona import Persona
from vipune_eval.vipune.contract import EMBED_MODEL_ID, EMBED_MODEL_REVISION


def embedding_b64(vector: np.ndarray) -> str:
    return base64.b64encode(np.asarray(vector, "<f4").tobytes()).decode("ascii")


def import_row(rid: str, project_id: str, content: str, embedding: str, created: str) -> dict:
    """One memory of the import JSONL (``embedding``: :func:`embedding_b64` of its vector)."""
    return {
        "id": rid,
        "project_id": project_id,
        "content": content,
        "metadata": None,
        "embedding": embedding,
        "created_at": created,
        "updated_at": created,
        "memory_type": "fact",
        "status": "active",
        "superseded_by": None,
        "retrieval_count": 0,
        "last_retrieved_at": None,
        "importance": "medium",
    }


def _row_template() -> str:
    """``json.dumps(import_row(...), ensure_ascii=False)`` as a format string, its JSON strings
    left as fields: a persona's 500 rows cost a third of dumping each dict (no encoder per row,
    no scan of the base64 for characters to escape)."""
    fields = ("rid", "project_id", "content", "embedding", "created")
    marked = json.dumps(import_row(*(f"@{f}@" for f in fields)), ensure_ascii=False)
    template = marked.replace("{", "{{").replace("}", "}}")
    for f in fields:  # the base64 alphabet needs no escaping: it keeps its quotes
        template = template.replace(f'"@{f}@"', f'"{{{f}}}"' if f == "embedding" else f"{{{f}}}")
    return template


_ROW = _row_template()


def import_lines(persona: Persona) -> list[str]:
    """The import JSONL: a header (both ``version`` and ``format_version``), then one row each."""
    dims = persona.vectors.shape[1]
    header = {
        "type": "export",
        "version": 1,
        "format_version": 1,
        "embedding_dims": dims,
        "model_id": EMBED_MODEL_ID,
        "model_revision": EMBED_MODEL_REVISION,
        "exported_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "rows": len(persona.row_ids),
    }
    lines = [json.dumps(header)]
    project_id = quoted(persona.question_id)
    matrix = np.ascontiguousarray(persona.vectors, "<f4")
    flat, width = matrix.data.cast("B"), 4 * dims  # .data: the array's memoryview
    vectors = [flat[i * width : (i + 1) * width] for i in range(len(matrix))]
    for rid, text, vector, created in zip(persona.row_ids, persona.texts, vectors, persona.created_at):
        lines.append(
            _ROW.format(
                rid=quoted(rid),
                project_id=project_id,
                content=quoted(text),
                embedding=base64.b64encode(vector).decode("ascii"),
                created=quoted(created),
            )
        )
    return lines
