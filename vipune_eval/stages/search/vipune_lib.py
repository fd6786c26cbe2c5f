"""search-vipune-lib, the lib lane: vipune's own search code on the cached vectors.

One vipune-lane process (lane/, linked against the vipune crate the binary was built from) for a
whole shard: per persona a throwaway database seeded with ``Database::insert_with_id`` in one
transaction, then ``Database::search`` with the cached query vector (the ``vipune-lib-semantic``
run) and that search fused with ``Database::search_bm25`` by RRF k = 25 over clamp(10 x limit,
50, 10000) candidates (``vipune-lib``; the fusion is the lane's copy of vipune's private
src/rrf.rs). No model and no process per persona: the whole per-run phase takes seconds.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

from vipune_eval.core import trec
from vipune_eval.core.failed_pair import FailedPair, failed_pair
from vipune_eval.core.io import Progress, log, write_json
from vipune_eval.core.persona import Persona, ShardSearch, checked_ranking
from vipune_eval.errors import EvalError
from vipune_eval.registry.vipune_runs import LIB, SEARCHES
from vipune_eval.vipune.lane import LaneError, LaneRun, check_lane


def run_vipune_lib(shard: ShardSearch, lane: Path, fingerprint: Path, timeout: float, on_error: str,
                   tmp: Path, out: Path, semantic_out: Path, status_out: Path) -> None:
    """Run the lib lane over one shard. ``on_error``: ``stop`` fails the shard on the first persona the
    lane refuses, crashes or hangs on, or answers out of contract; ``record`` lists such personas
    in the status file (left out of every average) and goes on with the others."""
    check_lane(lane, fingerprint)
    databases = database_folder(tmp)
    done: dict[str, dict[str, list[str]]] = {}
    seconds: dict[str, dict[str, float]] = {}
    failed: dict[str, FailedPair] = {}
    steps: Counter[str] = Counter()

    def fail(qid: str, why: FailedPair) -> None:
        failed[qid] = why
        log.error("%s", why["detail"])
        if on_error == "stop":
            raise LaneError(why["detail"], fix="set vipune.on_error: record to score the other pairs anyway")

    try:
        log.info("vipune-lib %s: the throwaway databases in %s", shard.name, databases)
        progress = Progress(f"vipune-lib {shard.name}: personas", total=shard.pair_count())
        search = LaneRun(lane, databases, timeout).search(shard.personas(), shard.limit, record=on_error == "record")
        with closing(search) as answers:  # the lane is ended before its databases are removed
            for persona, answer in answers:
                qid = persona.question_id
                if "error" in answer:  # vipune refused the persona, in its own words (no process: no exit code)
                    fail(qid, failed_pair(f"persona {qid}: vipune-lane: {answer['error']}", error=str(answer["error"])))
                    continue
                if "broken" in answer:  # the lane crashed, hung or broke its protocol on it (vipune said nothing)
                    fail(qid, failed_pair(f"persona {qid}: vipune-lane: {answer['broken']}"))
                    continue
                try:
                    spent = answer.get("seconds")
                    if not isinstance(spent, dict):
                        raise EvalError(f"persona {qid}: `{lane.name} search` answered without its seconds "
                                        "per step (a protocol violation)")
                    done[qid] = {name: persona.documents(_ranking(persona, answer, name, lane), shard.depth,
                                                         shard.collapse) for name in SEARCHES}
                except EvalError as exc:
                    fail(qid, failed_pair(exc.message))
                    continue
                steps.update(spent)
                seconds[qid] = _latency(spent)
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
    """Where the lane's throwaway databases live, emptied of what a killed attempt left: in RAM
    (``/dev/shm``) where the machine has it, in a folder named after the job's scratch folder (so
    the job's next attempt finds it), else in that scratch folder. ``Database::open`` commits its
    schema and migrations step by step, and on a disk the fsyncs of those commits cost more than
    seeding and searching the persona (benchmarks/bench_lanes.py); in RAM they cost nothing and
    the database is still a file."""
    shutil.rmtree(tmp, ignore_errors=True)
    if ram.is_dir() and os.access(ram, os.W_OK):
        folder = ram / f"vipune-lib-{hashlib.sha256(str(tmp.resolve()).encode()).hexdigest()[:16]}"
        shutil.rmtree(folder, ignore_errors=True)
        try:
            folder.mkdir()
            return folder
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
