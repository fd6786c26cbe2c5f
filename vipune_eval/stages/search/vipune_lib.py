"""search-vipune-lib, the lib lane: vipune's own search code on the cached vectors.

One vipune-lane process (lane/, linked against the vipune crate the binary was built from, with
vipune's private search files compiled in from that source) for a whole shard: per persona a
throwaway database seeded as ``vipune import`` seeds it, then vipune's ``MemoryStore::search``
(the ``vipune-lib-semantic`` run) and ``search_hybrid`` (``vipune-lib``) fed the cached query
vector, with the binary's own search flags (VipuneSettings.query_flags). No model and no process
per persona: the whole per-run phase takes seconds. Beside the run files, the arms each hybrid
search fused (core.lane_arms), what ``vipune-eval explain`` shows.
"""

from __future__ import annotations

import hashlib
import shutil
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

from vipune_eval.core import lane_arms, trec
from vipune_eval.core.failed_pair import FailedPair, failed_pair
from vipune_eval.core.io import Progress, log, read_json, write_json
from vipune_eval.core.persona import Persona, ShardSearch, checked_ranking
from vipune_eval.core.process import Watchdog
from vipune_eval.errors import EvalError
from vipune_eval.registry.lanes import LIB, SEARCHES
from vipune_eval.stages.search.kept_stores import Keeping, KeptStores
from vipune_eval.vipune.settings import VipuneSettings
from vipune_eval.vipune.vipune_lane import LaneError, VipuneLane, planned_lane

RAM = Path("/dev/shm")
OWNER = ".job"  # in a RAM folder: the scratch folder of the job it belongs to
# What a lane says when the folder of its databases is full (SQLite's SQLITE_FULL, or the OS's ENOSPC).
FULL = ("database or disk is full", "No space left on device")


def run_vipune_lib(
    shard: ShardSearch,
    vipune: VipuneSettings,
    lane: Path,
    lane_fingerprint: Path,
    on_error: str,
    out: Path,
    semantic_out: Path,
    status_out: Path,
    arms_out: Path,
    keeping: Keeping | None = None,
) -> None:
    """Run the lib lane over one shard: the build's vipune-lane, with the settings the binary lane
    runs the build with (its search flags, timeout and scratch folder). ``on_error``: ``stop``
    fails the shard on the first persona the vipune-lane refuses, crashes or hangs on, or answers out of
    contract; ``record`` lists such personas in the status file (left out of every average) and
    goes on with the others. A persona the vipune-lane could not hold in RAM (/dev/shm full) is searched
    again in the scratch folder. ``arms_out``: the arms file (core.lane_arms) of the personas searched.
    ``keeping``: where the personas' databases are kept as seeded, and how much of them, reused
    while nothing that wrote them changed (stages.search.kept_stores; None or 0 GB: none kept)."""
    fingerprint, timeout, tmp = lane_fingerprint, vipune.timeout, vipune.tmp
    if not str(lane) or str(lane) == ".":
        raise LaneError(
            f"{fingerprint}: no vipune-lane is configured for this build, known here by its "
            "fingerprint id alone, so its vipune-lib results cannot be computed again",
            fix="list the build by its path in vipune.compare (build.sh builds its vipune-lane beside it)",
        )
    guard = Watchdog(None, [ram_folder(tmp)])  # a job killed before its vipune-lane (and its watchdog) starts
    databases = database_folder(tmp)
    done: dict[str, dict[str, list[str]]] = {}
    digests: dict[str, list[str]] = {}  # each searched persona's (Persona.digests)
    fused: dict[str, lane_arms.PersonaArms] = {}
    seconds: dict[str, dict[str, float]] = {}
    failed: dict[str, FailedPair] = {}
    steps: Counter[str] = Counter()
    order: list[str] = []  # the shard's order, which the run files keep
    full: dict[str, str] = {}  # personas a full RAM folder refused → what the vipune-lane said

    def fail(qid: str, why: FailedPair) -> None:
        failed[qid] = why
        log.error("%s", why["detail"])
        if on_error == "stop":
            raise LaneError(why["detail"], fix="set vipune.on_error: record to score the other pairs anyway")

    def search(folder: Path, personas: Iterator[Persona]) -> None:
        run = VipuneLane(planned, folder, timeout, arms=True, store=stores.plan if stores else None).search(
            personas, vipune.query_flags(shard.ranking_settings.limit), record=on_error == "record"
        )
        with closing(run) as answers:  # the vipune-lane is ended before its databases are removed
            for persona, answer in answers:
                qid = persona.question_id
                if qid not in full:
                    order.append(qid)
                if "error" in answer:  # vipune refused the persona, in its own words
                    if folder != tmp and any(said in answer["error"] for said in FULL):
                        full[qid] = answer["error"]
                    else:
                        code = answer.get("exit_code")
                        refused = f" (`vipune search` exits {code} on it)" if code is not None else ""
                        fail(
                            qid,
                            failed_pair(
                                f"persona {qid}: vipune-lane refused it{refused}: {answer['error']}",
                                exit_code=code,
                                error=str(answer["error"]),
                            ),
                        )
                    continue
                if (
                    "broken" in answer
                ):  # the vipune-lane crashed, hung or broke its protocol on it (vipune said nothing)
                    fail(
                        qid,
                        failed_pair(f"persona {qid}: vipune-lane: {answer['broken']}", timeout=answer.get("timeout")),
                    )
                    continue
                try:
                    spent = answer.get("seconds")
                    if not isinstance(spent, dict):
                        raise EvalError(
                            f"persona {qid}: `{lane.name} search` answered without its seconds "
                            "per step (a protocol violation)"
                        )
                    rankings = {name: _ranking(persona, answer, name, lane) for name in SEARCHES}
                    fused[qid] = lane_arms.from_answer(
                        persona.row_ids, answer, shard.ranking_settings.limit, f"{lane.name} search"
                    )
                    done[qid] = {
                        name: persona.documents(ranking, shard.ranking_settings) for name, ranking in rankings.items()
                    }
                except EvalError as exc:
                    fail(qid, failed_pair(exc.message))
                    continue
                if stores:
                    stores.answered(persona, answer)
                steps.update(spent)
                seconds[qid] = _latency(spent)
                digests[qid] = persona.digests()
                progress.advance()

    stores = None
    try:
        planned = planned_lane(lane, fingerprint, tmp / "bin")  # every lane process the job starts runs this copy
        if keeping is not None:
            stores = KeptStores.for_lane(read_json(fingerprint)["built"], keeping, tmp / "stores")
        log.info("vipune-lib %s: the throwaway databases in %s", shard.name, databases)
        progress = Progress(f"vipune-lib {shard.name}: personas", total=shard.pair_count())
        search(databases, stores.personas(shard) if stores else shard.personas())
        if full:
            log.warning(
                "vipune-lib %s: %s is full (the vipune-lane said %r): %d personas searched again in the "
                "job's scratch folder %s",
                shard.name,
                databases.parent,
                next(iter(full.values())),
                len(full),
                tmp,
            )
            shutil.rmtree(databases, ignore_errors=True)
            tmp.mkdir(parents=True, exist_ok=True)
            search(tmp, (p for p in shard.personas() if p.question_id in full))
    finally:
        shutil.rmtree(databases, ignore_errors=True)
        if stores:
            stores.close()
        shutil.rmtree(tmp, ignore_errors=True)
        guard.release()
    ranked = [qid for qid in order if qid in done]
    for name, path in (("hybrid", out), ("semantic", semantic_out)):
        trec.write_run(path, [(qid, done[qid][name]) for qid in ranked], LIB.of(name))
    lane_arms.write(arms_out, (fused[qid] for qid in ranked))
    write_json(
        status_out,
        {
            "failed": failed,
            "search_seconds": {qid: seconds[qid]["hybrid"] for qid in ranked},
            "semantic_search_seconds": {qid: seconds[qid]["semantic"] for qid in ranked},
            "lane_seconds": dict(sorted(steps.items())),  # where the shard's time went, per step
            "searched": shard.searched(
                vipune.query_flags(shard.ranking_settings.limit), {qid: digests[qid] for qid in ranked}
            ),
        },
    )
    log.info(
        "vipune-lib %s: %d personas, %d failed%s; seconds per step: %s",
        shard.name,
        len(done),
        len(failed),
        f", {len(full)} searched on disk ({databases.parent} full)" if full else "",
        ", ".join(f"{k} {v:.2f}" for k, v in sorted(steps.items())),
    )


def ram_folder(tmp: Path, ram: Path | None = None) -> Path:
    """The RAM folder of the job whose scratch folder is ``tmp`` (made by ``database_folder``)."""
    ram = RAM if ram is None else ram
    return ram / f"vipune-lib-{hashlib.sha256(str(tmp.resolve()).encode()).hexdigest()[:16]}"


def database_folder(tmp: Path, ram: Path | None = None) -> Path:
    """Where the vipune-lane's throwaway databases live, emptied of what a killed attempt left: in RAM
    (``/dev/shm``) where the machine has it and it takes a file, in a folder named after the
    job's scratch folder (so the job's next attempt finds it; its ``.job`` file names that
    scratch folder, so a run finds what its killed jobs left: ``clear_stale_databases``), else
    in that scratch folder (a full or read-only /dev/shm: the log says why). ``Database::open``
    commits its schema and migrations step by step, and on a disk the fsyncs of those commits
    cost more than seeding and searching the persona (benchmarks/bench_lanes.py); in RAM they
    cost nothing and the database is still a file. ``ram``: /dev/shm (``RAM``)."""
    ram = RAM if ram is None else ram
    shutil.rmtree(tmp, ignore_errors=True)
    if ram.is_dir():
        folder = ram_folder(tmp, ram)
        shutil.rmtree(folder, ignore_errors=True)
        try:
            folder.mkdir()
            (folder / OWNER).write_text(str(tmp.resolve()), encoding="utf-8")
            return folder
        except OSError as exc:
            shutil.rmtree(folder, ignore_errors=True)
            log.warning(
                "vipune-lib: %s cannot hold the throwaway databases (%s): they go to the job's scratch folder %s",
                ram,
                exc.strerror or exc,
                tmp,
            )
    tmp.mkdir(parents=True, exist_ok=True)
    return tmp


def clear_stale_databases(tmp_root: Path, ram: Path | None = None) -> list[Path]:
    """Remove the RAM folders of the jobs whose scratch folders lie under ``tmp_root`` (a run's
    results/tmp), and return them: called when none of those jobs runs (a run's start, its lock
    held), they are what killed jobs left in RAM."""
    ram, root, removed = RAM if ram is None else ram, tmp_root.resolve(), []
    for folder in sorted(ram.glob("vipune-lib-*")) if ram.is_dir() else []:
        try:
            owner = Path((folder / OWNER).read_text(encoding="utf-8"))
        except OSError:
            continue
        if owner == root or root in owner.parents:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _ranking(persona: Persona, answer: dict[str, Any], name: str, lane: Path) -> list[tuple[str, float]]:
    return checked_ranking(persona, answer.get(name), f"{lane.name} search ({name})")


def _latency(steps: dict[str, float]) -> dict[str, float]:
    """Per persona, what each ranking cost in the vipune-lane: the database work is shared by both."""
    return {"semantic": steps.get("semantic", 0.0), "hybrid": steps.get("hybrid", 0.0)}
