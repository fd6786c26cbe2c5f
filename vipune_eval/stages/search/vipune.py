"""search-vipune, the binary lane: one throwaway database per persona, driven through the client.

Per persona: the import JSONL from the cached vectors (docs/vipune-contract.md: a header with
both ``version`` and ``format_version``), ``import`` into a fresh database, then one
``search --hybrid`` (the `vipune` retriever) and one ``search --no-hybrid`` (`vipune-semantic`)
with ``--recency 0 --limit L --no-touch -- QUESTION``; ids map back to documents through the
persona's lookup. A result that is not a row of the persona, repeats an id or exceeds the limit
is a contract violation and fails the persona. Every call runs the job's private copy of the
planned binary (vipune.binary.planned_binary): a rebuild of vipune.binary while the job runs
changes nothing of its shard.

Finished personas are cached (by a hash of rows, question and limit) so that a shard killed or
stopped part-way redoes only the rest; a shard that completed marks its cache entries, and a
later run of the same shard (``--forcerun``, or a fingerprint file that changed) clears them
and searches again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from vipune_eval.core import trec
from vipune_eval.core.failed_pair import failed_pair
from vipune_eval.core.io import Progress, log, read_json, write_json
from vipune_eval.core.persona import Persona, Ranking, ShardSearch
from vipune_eval.core.process import shown
from vipune_eval.registry.lanes import BINARY
from vipune_eval.vipune.binary import planned_binary
from vipune_eval.vipune.client import Vipune, VipuneError
from vipune_eval.vipune.import_format import import_lines
from vipune_eval.vipune.settings import VipuneSettings


def ranking_of(persona: Persona, hits: list[dict[str, Any]], command: str) -> Ranking:
    """The hits as (row id, score), refusing ids that are unknown or repeated."""
    ranking: Ranking = []
    seen: set[str] = set()
    for rank, hit in enumerate(hits, start=1):
        rid = hit.get("id")
        if not isinstance(rid, str) or not persona.knows(rid):
            raise VipuneError(
                f"persona {persona.question_id}: `{command}` returned id {rid!r} at "
                f"rank {rank}, not a row of this persona (a contract violation)"
            )
        if rid in seen:
            repeated = [h.get("id") for h in hits]
            raise VipuneError(
                f"persona {persona.question_id}: `{command}` returned id {rid!r} twice "
                f"(ranks {repeated.index(rid) + 1} and {rank}; a contract violation)"
            )
        seen.add(rid)
        score = hit.get("similarity")
        ranking.append((rid, float(score) if isinstance(score, (int, float)) else 0.0))
    return ranking


def searches(vipune: VipuneSettings, limit: int) -> dict[str, list[str]]:
    """The persona's two searches, each by its flags: ``search --hybrid`` (the vipune run) and
    ``search --no-hybrid`` (vipune-semantic)."""
    return {"hybrid": vipune.search_flags(limit, True), "semantic": vipune.search_flags(limit, False)}


def evaluate(
    client: Vipune,
    persona: Persona,
    flags: dict[str, list[str]],
    limit: int,
    workdir: Path,
    lines: list[str] | None = None,
) -> dict[str, Any]:
    """Import the persona into a fresh database; its rankings, one per search (``searches``, each
    told ``--limit limit``)."""
    qid = persona.question_id
    where = f"persona {qid}"
    with tempfile.TemporaryDirectory(prefix="persona-", dir=workdir) as tmp:
        db, jsonl = Path(tmp).resolve() / "memories.db", Path(tmp).resolve() / "import.jsonl"
        jsonl.write_text("\n".join(lines or import_lines(persona)) + "\n", encoding="utf-8")
        out = client.import_file(db, jsonl, where)
        if out.get("inserted") != len(persona.row_ids) or out.get("skipped", 0) != 0:
            raise VipuneError(
                f"{where}: `{client.shown} --db-path {db} --json import {jsonl}` reported {out}, "
                f"but {len(persona.row_ids)} rows were written to a fresh database"
            )
        result: dict[str, Any] = {}
        for name, search_flags in flags.items():
            hits, seconds = client.search(db, qid, persona.question, search_flags, limit, where)
            command = shown([client.shown, *client.search_args(db, qid, persona.question, search_flags)])
            result[name] = {"ranking": ranking_of(persona, hits, command), "seconds": seconds}
    return result


def persona_key(persona: Persona, flags: dict[str, list[str]], lines: list[str]) -> str:
    """Everything a persona's vipune result depends on besides the binary: rows, question and
    every flag of its searches (``searches``)."""
    digest = hashlib.sha256(f"{json.dumps(flags, sort_keys=True)}\n{persona.question}\n".encode())
    for line in lines[1:]:  # the header holds a timestamp
        digest.update(line.encode())
    return digest.hexdigest()


def run_vipune(
    shard: ShardSearch,
    vipune: VipuneSettings,
    threads: int,
    on_error: str,
    cache: Path,
    out: Path,
    semantic_out: Path,
    status_out: Path,
) -> None:
    """Run the binary lane over one shard. ``on_error``: ``stop`` fails the shard on the first
    failed persona (finished ones stay cached), ``record`` lists failed personas in the status
    file (they are left out of every average)."""
    tmp, limit, flags = vipune.tmp, shard.ranking_settings.limit, searches(vipune, shard.ranking_settings.limit)
    total = shard.pair_count()
    cache.mkdir(parents=True, exist_ok=True)
    marker = cache / f"shard-{shard.shard}-of-{shard.shards}.complete.json"
    if marker.exists():  # the shard completed before: this run must search again
        for key in read_json(marker):
            (cache / f"{key}.json").unlink(missing_ok=True)
        marker.unlink()
    shutil.rmtree(tmp, ignore_errors=True)  # what a killed attempt left behind
    tmp.mkdir(parents=True)
    keys: list[str] = []
    try:
        binary = planned_binary(vipune, tmp / "bin")  # every call runs this copy of the planned bytes
        client = Vipune(binary.path, tmp / "home", vipune.timeout, hf_home=vipune.hf_home, shown=binary.shown)
        progress = Progress(f"vipune {shard.name}: personas", total=total)
        log.info("vipune %s: %d personas, %d concurrent calls", shard.name, total, threads)
        stopping = threading.Event()

        def one(persona: Persona) -> dict[str, Any]:
            """What the shard keeps of a persona: its run documents and timings, or its error."""
            qid = persona.question_id
            lines = import_lines(persona)  # built once: the cache key and the import share it
            key = persona_key(persona, flags, lines)
            keys.append(key)
            cached = cache / f"{key}.json"
            if cached.exists():
                result = read_json(cached)
            elif stopping.is_set():
                return {"question_id": qid}  # on_error=stop: start nothing new (neither run nor error)
            else:
                try:
                    result = evaluate(client, persona, flags, limit, tmp, lines)
                except VipuneError as exc:
                    log.error("%s", exc)
                    if on_error == "stop":
                        stopping.set()
                    return {
                        "question_id": qid,
                        "error": failed_pair(str(exc), exc.exit_code, exc.error, exc.timeout),
                        "exception": exc,
                    }
                binary.check_wrapped()  # before the result is kept under this build's fingerprint
                write_json(cached, result)
            progress.advance()
            return {
                "question_id": qid,
                "digests": persona.digests(),
                "seconds": {n: result[n]["seconds"] for n in ("hybrid", "semantic")},
                "documents": {
                    n: persona.documents([tuple(hit) for hit in result[n]["ranking"]], shard.ranking_settings)
                    for n in ("hybrid", "semantic")
                },
            }

        with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
            # A few personas in flight at a time, not the whole shard's rows and vectors.
            results = list(in_order(pool, one, shard.personas(), window=2 * max(1, threads)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    errors = [r["exception"] for r in results if "error" in r]
    if errors and on_error == "stop":
        raise VipuneError(
            errors[0].message + (f" (and {len(errors) - 1} more failed personas)" if len(errors) > 1 else ""),
            fix="; ".join(
                filter(
                    None,
                    [
                        errors[0].fix,
                        "finished personas are cached: a rerun redoes only the rest; set "
                        "vipune.on_error: record to score the other pairs anyway",
                    ],
                )
            ),
        )
    done = [r for r in results if "documents" in r]
    for name, path in (("hybrid", out), ("semantic", semantic_out)):
        trec.write_run(path, [(r["question_id"], r["documents"][name]) for r in done], BINARY.of(name))
    write_json(
        status_out,
        {
            "failed": {r["question_id"]: r["error"] for r in results if "error" in r},
            "search_seconds": {r["question_id"]: r["seconds"]["hybrid"] for r in done},
            "semantic_search_seconds": {r["question_id"]: r["seconds"]["semantic"] for r in done},
            "searched": shard.searched(vipune.query_flags(limit), {r["question_id"]: r["digests"] for r in done}),
        },
    )
    write_json(marker, sorted(set(keys)))
    failed = len(results) - len(done)
    if failed:
        log.warning(
            "vipune %s: %d of %d personas failed and are recorded in %s", shard.name, failed, len(results), status_out
        )


def in_order(pool: ThreadPoolExecutor, fn: Callable, items: Iterable, window: int) -> Iterator:
    """``pool.map(fn, items)`` with at most ``window`` items taken from ``items`` ahead of the
    results handed back (``map`` would draw the whole iterable at once)."""
    pending: deque = deque()
    for item in items:
        pending.append(pool.submit(fn, item))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()
