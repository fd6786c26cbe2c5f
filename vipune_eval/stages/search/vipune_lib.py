"""search-vipune-lib: the model-free lane, vipune's own search code on the cached vectors.

One vipune-lane process (lane/, linked against the vipune crate the binary was built from) for a
whole shard: per persona a throwaway database seeded with ``Database::insert_with_id`` in one
transaction, then ``Database::search`` with the cached query vector (the ``vipune-lib-semantic``
run) and that search fused with ``Database::search_bm25`` by RRF k = 25 over clamp(10 x limit,
50, 10000) candidates (``vipune-lib``; the fusion is the lane's copy of vipune's private
src/rrf.rs). No model and no process per persona: the whole per-run phase takes seconds.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from vipune_eval.core import trec
from vipune_eval.core.io import Progress, log, write_json
from vipune_eval.core.persona import Persona, ShardSearch, checked_ranking
from vipune_eval.registry.vipune_runs import LIB, SEARCHES
from vipune_eval.vipune.lane import LaneError, LaneRun, check_lane

RANKINGS = SEARCHES  # the lane's two answers per persona: vipune-lib, vipune-lib-semantic


def run_vipune_lib(shard: ShardSearch, lane: Path, fingerprint: Path, timeout: float, on_error: str,
                   tmp: Path, out: Path, semantic_out: Path, status_out: Path) -> None:
    """The lane over one shard. ``on_error``: ``stop`` fails the shard on the first persona vipune
    refuses, ``record`` lists such personas in the status file (left out of every average)."""
    check_lane(lane, fingerprint)
    shutil.rmtree(tmp, ignore_errors=True)  # what a killed attempt left behind
    databases = database_folder(tmp)
    log.info("vipune-lib %s: the throwaway databases in %s", shard.name, databases)
    progress = Progress(f"vipune-lib {shard.name}: personas", total=shard.pair_count())
    done: dict[str, dict[str, list[str]]] = {}
    seconds: dict[str, dict[str, float]] = {}
    failed: dict[str, str] = {}
    steps: Counter[str] = Counter()
    try:
        for persona, answer in LaneRun(lane, databases, timeout).search(shard.personas(), shard.limit):
            qid = persona.question_id
            if "error" in answer:
                failed[qid] = f"persona {qid}: vipune-lane: {answer['error']}"
                log.error("%s", failed[qid])
                if on_error == "stop":
                    raise LaneError(failed[qid], fix="set vipune.on_error: record to score the other pairs anyway")
                continue
            done[qid] = {name: persona.documents(_ranking(persona, answer, name, lane), shard.depth, shard.collapse)
                         for name in RANKINGS}
            steps.update(answer["seconds"])
            seconds[qid] = _latency(answer["seconds"])
            progress.advance()
    finally:
        shutil.rmtree(databases, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    for name, path in (("hybrid", out), ("semantic", semantic_out)):
        trec.write_run(path, [(qid, docs[name]) for qid, docs in done.items()],
                       LIB.of(name))
    write_json(status_out, {
        "failed": failed,
        "search_seconds": {qid: s["hybrid"] for qid, s in seconds.items()},
        "semantic_search_seconds": {qid: s["semantic"] for qid, s in seconds.items()},
        "lane_seconds": dict(sorted(steps.items())),  # where the shard's time went, per step
    })
    log.info("vipune-lib %s: %d personas, %d failed; seconds per step: %s", shard.name, len(done),
             len(failed), ", ".join(f"{k} {v:.2f}" for k, v in sorted(steps.items())))


def database_folder(tmp: Path, ram: Path = Path("/dev/shm")) -> Path:
    """Where the lane's throwaway databases live: in RAM (``/dev/shm``) where the machine has it,
    else in the job's scratch folder. ``Database::open`` commits its schema and migrations step by
    step, and on a disk the fsyncs of those commits cost more than seeding and searching the
    persona (benchmarks/bench_lanes.py); in RAM they cost nothing and the database is still a file."""
    if ram.is_dir():
        try:
            return Path(tempfile.mkdtemp(prefix="vipune-lib-", dir=ram))
        except OSError:
            pass
    tmp.mkdir(parents=True, exist_ok=True)
    return tmp


def _ranking(persona: Persona, answer: dict[str, Any], name: str, lane: Path) -> list[tuple[str, float]]:
    return checked_ranking(persona, answer.get(name), f"{lane.name} search ({name})")


def _latency(steps: dict[str, float]) -> dict[str, float]:
    """Per persona, what each ranking cost in the lane: the database work is shared by both."""
    return {"semantic": steps.get("semantic", 0.0),
            "hybrid": steps.get("dense_pool", 0.0) + steps.get("bm25", 0.0) + steps.get("fuse", 0.0)}
