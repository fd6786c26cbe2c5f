"""vipune's import format: a header with both version keys, then one row per memory, each exactly
what json.dumps of the row writes, with the vector's exact float32 bytes."""

import base64
import json

import numpy as np

from vipune_eval.core.persona import Persona
from vipune_eval.vipune.contract import EMBED_MODEL_ID
from vipune_eval.vipune.import_format import embedding_b64, import_lines, import_row


def test_import_lines_carry_both_header_keys_and_exact_vectors():
    vectors = np.random.default_rng(0).standard_normal((3, 384)).astype(np.float32)
    persona = Persona(
        "q1",
        "?",
        [f"q1::s{i}" for i in range(3)],
        [f"s{i}" for i in range(3)],
        ["2023-01-01T00:00:00Z"] * 3,
        ["a", "b", "c"],
        vectors,
        np.zeros(384, np.float32),
    )
    lines = import_lines(persona)
    header = json.loads(lines[0])
    assert header["version"] == header["format_version"] == 1 and header["rows"] == 3
    assert header["embedding_dims"] == 384 and header["model_id"] == EMBED_MODEL_ID
    row = json.loads(lines[1])
    assert row["id"] == "q1::s0" and row["project_id"] == "q1" and row["retrieval_count"] == 0
    assert row["memory_type"] == "fact" and row["status"] == "active"
    vector = np.frombuffer(base64.b64decode(row["embedding"]), "<f4")
    assert vector.shape == (384,) and np.array_equal(vector, vectors[0])


def test_import_rows_are_json_dumps_of_the_row_whatever_the_strings():
    """The rows come from a format string (fast); each must be exactly what json.dumps of the row
    would write, including braces, quotes, escapes and non-ASCII, and vectors of any layout."""
    texts = ['{rid} {{x}} "q" \\ \n\t\x00', "naïve ☃ \u2028 😀", "", "}{"]
    qid = '-{0}"q\\'
    vectors = np.random.default_rng(3).standard_normal((8, 6))[::2]  # float64, not contiguous
    persona = Persona(
        qid, "?", [f"{qid}::{t}" for t in texts], ["s"] * 4, ['2023-"{}"'] * 4, texts, vectors, np.zeros(6, np.float32)
    )
    lines = import_lines(persona)
    assert lines[1:] == [
        json.dumps(import_row(rid, qid, text, embedding_b64(v), created), ensure_ascii=False)
        for rid, text, v, created in zip(persona.row_ids, texts, vectors, persona.created_at)
    ]
    assert np.array_equal(
        np.frombuffer(base64.b64decode(json.loads(lines[2])["embedding"]), "<f4"), vectors[1].astype(np.float32)
    )
