"""The vipune lane: one throwaway database per persona, driven as a subprocess.

Follows the contract in shared/vipune-contract.md: JSONL import with both header keys, one
hybrid search with ``--recency 0 --limit L --no-touch -- QUESTION``, ids mapped back to sessions.
The binary runs with a private XDG_CONFIG_HOME, no VIPUNE_* variables and HF_HOME pointing at the
harness's own model cache, so neither a user's config nor their model cache can skew a result.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from .io import EvalError, Progress, log, read_json, write_json
from .persona import Persona, Ranking, personas_of_shard, write_run
from .sources import isolated_env, sha256_file

EMBED_MODEL_ID = "BAAI/bge-small-en-v1.5"
EMBED_MODEL_REVISION = "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"


class VipuneError(EvalError):
    """A vipune call failed; the message names the persona, the command line and stderr."""


@dataclass
class VipuneResult:
    ranking: Ranking
    search_seconds: float


def embedding_b64(vector: np.ndarray) -> str:
    return base64.b64encode(np.asarray(vector, "<f4").tobytes()).decode("ascii")


def import_lines(persona: Persona) -> list[str]:
    """The import JSONL: a header (both ``version`` and ``format_version``), then one row per session."""
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


def shown(cmd: list[str]) -> str:
    """A command line for an error message, with a long last argument (a question) shortened."""
    words = [str(c) for c in cmd]
    if len(words[-1]) > 200:
        words[-1] = words[-1][:200] + f"… ({len(words[-1])} characters)"
    return " ".join(words)


class Vipune:
    def __init__(self, binary: Path, env: dict[str, str], timeout: float) -> None:
        self.binary, self.env, self.timeout = binary, env, timeout

    def run(self, args: list[str], persona: str) -> subprocess.CompletedProcess:
        """Run ``vipune ARGS``; raise VipuneError only when it cannot run or hangs."""
        cmd = [str(self.binary), *args]
        try:
            return subprocess.run(cmd, capture_output=True, text=True, env=self.env,
                                  timeout=self.timeout, errors="replace")
        except subprocess.TimeoutExpired as exc:
            raise VipuneError(f"{persona}: `{shown(cmd)}` timed out after {self.timeout:g} s "
                              "(vipune.timeout)") from exc
        except (OSError, ValueError) as exc:  # ValueError: an argument holds a NUL byte
            raise VipuneError(f"{persona}: cannot run `{shown(cmd)}`: {exc}") from exc

    def call(self, args: list[str], persona: str) -> dict[str, Any]:
        """Run ``vipune ARGS``; return its JSON output or raise VipuneError saying what happened."""
        proc = self.run(args, persona)
        where = f"{persona}: `{shown(proc.args)}` exited {proc.returncode}"
        stderr = proc.stderr.strip()[-2000:]
        if proc.returncode < 0:
            raise VipuneError(f"{where} (killed by signal {-proc.returncode}); stderr: {stderr}")
        try:
            out = json.loads(proc.stdout)
        except json.JSONDecodeError:
            out = None
        if proc.returncode != 0:
            message = out.get("error") if isinstance(out, dict) else proc.stdout.strip()[:500]
            raise VipuneError(f"{where}: {message}; stderr: {stderr}")
        if not isinstance(out, dict):
            raise VipuneError(f"{where} but its stdout is not a JSON object: {proc.stdout[:300]!r}; "
                              f"stderr: {stderr}")
        return out

    def evaluate(self, persona: Persona, limit: int, workdir: Path,
                 lines: list[str] | None = None) -> VipuneResult:
        """Import the persona into a fresh database and run its one hybrid query."""
        qid = persona.question_id
        with tempfile.TemporaryDirectory(prefix="persona-", dir=workdir) as tmp:
            db, jsonl = Path(tmp) / "memories.db", Path(tmp) / "import.jsonl"
            jsonl.write_text("\n".join(lines or import_lines(persona)) + "\n", encoding="utf-8")
            args = ["--db-path", str(db), "--json", "import", str(jsonl)]
            out = self.call(args, f"persona {qid}")
            if out.get("inserted") != len(persona.row_ids) or out.get("skipped", 0) != 0:
                raise VipuneError(f"persona {qid}: `{shown([self.binary, *args])}` reported {out}, but "
                                  f"{len(persona.row_ids)} rows were written to a fresh database")
            start = time.perf_counter()
            out = self.call(["--db-path", str(db), "--project", qid, "--json", "search", "--hybrid",
                             "--recency", "0", "--limit", str(limit), "--no-touch", "--",
                             persona.question], f"persona {qid}")
            seconds = time.perf_counter() - start
        results = out.get("results")
        if not isinstance(results, list):
            raise VipuneError(f"persona {qid}: search output has no 'results' list: {str(out)[:300]}")
        known = set(persona.row_ids)
        ranking = []
        for hit in results:
            rid = hit.get("id") if isinstance(hit, dict) else None
            if rid not in known:
                raise VipuneError(f"persona {qid}: search returned id {rid!r}, not a row of this persona")
            ranking.append((rid, float(hit.get("similarity") or 0.0)))
        return VipuneResult(ranking, seconds)


def check_fingerprint(binary: Path, fingerprint: Path) -> dict[str, Any]:
    """The fingerprint ``binary`` must match: results are filed under it, so the bytes must agree."""
    expected = read_json(fingerprint)
    actual = sha256_file(binary)
    if actual != expected["sha256"]:
        raise EvalError(f"{binary} (sha256 {actual[:12]}) is not the binary this result belongs to "
                        f"({fingerprint}, sha256 {expected['sha256'][:12]}); rerun snakemake so it re-plans")
    return expected


def vipune_env(hf_home: Path, workdir: Path) -> dict[str, str]:
    """vipune's environment: isolated from the user's config, reading the harness's model cache."""
    return isolated_env({"HF_HOME": str(hf_home.resolve()), "HF_HUB_OFFLINE": "1"}, workdir / "xdg")


def persona_key(persona: Persona, limit: int, lines: list[str]) -> str:
    """Everything a persona's vipune result depends on besides the binary: rows, question, limit."""
    digest = hashlib.sha256(f"{limit}\n{persona.question}\n".encode())
    for line in lines[1:]:  # the header holds a timestamp
        digest.update(line.encode())
    return digest.hexdigest()


def run_vipune(pairs: Path, texts: Path, embeddings: list[Path], shard: int, shards: int,
               binary: Path, fingerprint: Path, hf_home: Path, limit: int, threads: int,
               timeout: float, on_error: str, cache_dir: Path, out: Path, status_out: Path) -> None:
    """Run the vipune lane over one shard; finished personas are cached, so a rerun redoes only
    what failed or changed. ``on_error``: ``stop`` fails the shard on the first failed persona,
    ``record`` lists failed personas in the status file (they are left out of every average).
    """
    check_fingerprint(binary, fingerprint)
    personas = list(personas_of_shard(pairs, texts, embeddings, shard, shards))
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vipune-eval-") as tmp:
        workdir = Path(tmp)
        client = Vipune(binary, vipune_env(hf_home, workdir), timeout)
        progress = Progress(f"vipune shard {shard}/{shards}: personas", total=len(personas))
        log.info("vipune shard %d/%d: %d personas, %d concurrent calls", shard, shards,
                 len(personas), threads)

        stopping = threading.Event()

        def one(persona: Persona) -> dict[str, Any] | None:
            lines = import_lines(persona)  # built once: the cache key and the import share it
            cached = cache_dir / f"{persona_key(persona, limit, lines)}.json"
            if cached.exists():
                result = read_json(cached)
            elif stopping.is_set():
                return None  # on_error=stop: start nothing new once a persona has failed
            else:
                try:
                    found = client.evaluate(persona, limit, workdir, lines)
                except VipuneError as exc:
                    log.error("%s", exc)
                    if on_error == "stop":
                        stopping.set()
                    return {"error": str(exc)}
                result = {"ranking": found.ranking, "search_seconds": found.search_seconds}
                write_json(cached, result)
            progress.advance()
            return result

        with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
            results = list(pool.map(one, personas))
    errors = [r["error"] for r in results if r and "error" in r]
    if errors and on_error == "stop":
        raise VipuneError(f"{errors[0]}" + (f" (and {len(errors) - 1} more failed personas)"
                                            if len(errors) > 1 else "") +
                          ". Finished personas are cached: a rerun redoes only the rest. "
                          "Set vipune.on_error: record to score the other pairs anyway.")
    failed = {p.question_id: r["error"] for p, r in zip(personas, results) if "error" in r}
    write_run(out, [(p, [tuple(hit) for hit in r["ranking"]]) for p, r in zip(personas, results)
                    if "error" not in r], "vipune")
    write_json(status_out, {
        "failed": failed,
        "search_seconds": {p.question_id: r["search_seconds"] for p, r in zip(personas, results)
                           if "error" not in r},
    })
    if failed:
        log.warning("vipune shard %d/%d: %d of %d personas failed and are recorded in %s",
                    shard, shards, len(failed), len(personas), status_out)
