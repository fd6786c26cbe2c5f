"""preflight: check, before any persona runs, that the binary honours the contract the harness
relies on and embeds exactly as the cached Parquet vectors were embedded.
"""

from __future__ import annotations

import base64
import json
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .embed import load_model
from .io import EvalError, log, write_json
from .persona import Persona, row_id
from .vipune import Vipune, VipuneError, check_fingerprint, import_lines, vipune_env

QUERY = "zebra violin"
ROWS = [
    "the zebra played a violin at the harbour",
    "we cooked pasta with fresh tomatoes and basil",
    "a quiet morning walk in the park with the dog",
    "the train was late again on the way to work",
    "my sister bought a new bicycle for the summer",
]
PARITY_TEXTS = ["I moved to Lisbon last spring and started learning Portuguese.",
                "user: what should I cook tonight?\nassistant: try a mushroom risotto.",
                "Remember that my dentist appointment is on Friday at 9."]
MIN_PARITY_COSINE = 0.999


def _probe_persona(embed: Callable[[list[str]], np.ndarray]) -> Persona:
    """Five rows; the one holding every query word is the semantically farthest from the query."""
    query_vector = embed([QUERY])[0]
    vectors = embed(ROWS)
    vectors[0] = -query_vector
    return Persona(question_id="preflight", question=QUERY,
                   row_ids=[row_id("preflight", str(i)) for i in range(len(ROWS))],
                   session_ids=[str(i) for i in range(len(ROWS))],
                   created_at=["2024-01-01T00:00:00Z"] * len(ROWS), texts=ROWS,
                   vectors=vectors, query_vector=query_vector)


def check_commands(vipune: Vipune, fingerprint: dict[str, Any]) -> str:
    missing = [c for c in ("import", "export") if vipune.run([c, "--help"], "preflight").returncode != 0]
    if missing:
        raise EvalError(f"vipune {fingerprint['version']} has no {' or '.join(missing)} command "
                        "(they arrived after vipune 0.9.1); upgrade: `cargo install vipune --force`, "
                        "or build a current checkout of randomm/vipune")
    return "import and export present"


def check_import_and_fts(vipune: Vipune, persona: Persona, db: Path, jsonl: Path) -> dict[str, str]:
    jsonl.write_text("\n".join(import_lines(persona)) + "\n", encoding="utf-8")
    out = vipune.call(["--db-path", str(db), "--json", "import", str(jsonl)], "preflight")
    if out.get("inserted") != len(ROWS) or out.get("skipped", 0) != 0:
        raise EvalError(f"vipune import of {len(ROWS)} rows (header with version and "
                        f"format_version) reported {out}")
    doctor = vipune.call(["--db-path", str(db), "--json", "doctor", "--fts"], "preflight")
    if doctor.get("in_sync") is not True:
        raise EvalError(f"after import, `vipune doctor --fts` says the FTS index is not in sync: {doctor}")
    hits = vipune.call(["--db-path", str(db), "--project", persona.question_id, "--json", "search",
                        "--hybrid", "--recency", "0", "--limit", "1", "--no-touch", "--", QUERY],
                       "preflight")["results"]
    if not hits or hits[0].get("id") != persona.row_ids[0]:
        raise EvalError("`search --hybrid` did not put first the only row holding every query word "
                        f"(its BM25 arm found nothing: FTS triggers did not fire on import?); got {hits}")
    return {"import": f"{out}", "fts": "in sync; the BM25-only row is found by hybrid search"}


def check_refusals(vipune: Vipune, db: Path) -> dict[str, str]:
    search = ["--db-path", str(db), "--project", "preflight", "--json", "search", "--hybrid",
              "--recency", "0", "--no-touch"]
    long_query = vipune.run([*search, "--limit", "10", "--", "word " * 600], "preflight")
    if long_query.returncode != 3:
        raise EvalError(f"a 600-word query should exit 3 (over 512 tokens), it exited "
                        f"{long_query.returncode}: {long_query.stdout[:200]}")
    too_many = vipune.run([*search, "--limit", "10001", "--", QUERY], "preflight")
    if too_many.returncode == 0:
        raise EvalError("`search --limit 10001` was accepted; vipune's MAX_SEARCH_LIMIT is 10000")
    return {"query_over_512_tokens": "exit 3", "limit_10001": f"refused (exit {too_many.returncode})"}


def check_parity(vipune: Vipune, embed: Callable[[list[str]], np.ndarray], db: Path,
                 export: Path, recipe: str) -> dict[str, Any]:
    """vipune's own embedding of probe texts (add, then export) against the harness's."""
    for text in PARITY_TEXTS:
        vipune.call(["--db-path", str(db), "--project", "parity", "--json", "add", text, "--force"],
                    "preflight")
    vipune.call(["--db-path", str(db), "--json", "export", str(export)], "preflight")
    theirs = {}
    for line in export.read_text(encoding="utf-8").split("\n")[1:]:
        if line.strip():
            row = json.loads(line)
            theirs[row["content"]] = np.frombuffer(base64.b64decode(row["embedding"]), "<f4")
    ours = embed(PARITY_TEXTS)
    cosines = []
    for text, vector in zip(PARITY_TEXTS, ours):
        if text not in theirs:
            raise EvalError(f"`vipune export` did not return the probe row {text!r}")
        other = theirs[text]
        cosines.append(float(np.dot(vector, other) / (np.linalg.norm(vector) * np.linalg.norm(other))))
    if min(cosines) < MIN_PARITY_COSINE:
        raise EvalError(
            f"embedding parity failed: vipune's vectors of the probe texts have cosine "
            f"{min(cosines):.4f} (< {MIN_PARITY_COSINE}) with the harness's. The harness embeds with "
            f"{recipe}; vipune embeds with its built-in profile (bge-small-en-v1.5 at its pinned "
            "revision, mean pooling, L2) from HF_HOME. Passage vectors and vipune's query vectors "
            "would not live in the same space: fix model.* in the config.")
    return {"min_cosine": min(cosines), "probes": len(cosines)}


def run_preflight(binary: Path, fingerprint_path: Path, hf_home: Path, model_dir: Path, file: str,
                  pooling: str, timeout: float, out: Path) -> dict[str, Any]:
    fingerprint = check_fingerprint(binary, fingerprint_path)
    model = load_model(model_dir, file, pooling, threads=1)

    def embed(texts: list[str]) -> np.ndarray:
        return np.array(list(model.embed(texts)), dtype=np.float32)

    recipe = f"{model_dir / file} with {pooling} pooling + L2"
    with tempfile.TemporaryDirectory(prefix="vipune-preflight-") as tmp:
        tmp_path = Path(tmp)
        vipune = Vipune(binary, vipune_env(hf_home, tmp_path), timeout)
        try:
            findings = {
                "binary": fingerprint,
                "commands": check_commands(vipune, fingerprint),
                **check_import_and_fts(vipune, _probe_persona(embed), tmp_path / "a.db",
                                       tmp_path / "rows.jsonl"),
                **check_refusals(vipune, tmp_path / "a.db"),
                "embedding_parity": check_parity(vipune, embed, tmp_path / "b.db",
                                                 tmp_path / "export.jsonl", recipe),
            }
        except VipuneError as exc:
            raise EvalError(f"preflight of {binary}: {exc}") from exc
        except EvalError as exc:
            raise EvalError(f"preflight of {binary} (vipune {fingerprint['version']}): {exc}") from exc
    write_json(out, findings)
    log.info("preflight of vipune %s passed: %s", fingerprint["version"], findings["embedding_parity"])
    return findings
