"""Kept stores: each persona's database as the lib lane seeded it, kept and reused while nothing
that could have written it changed.

Seeding a persona (vipune's ``Database::open`` and its inserts, FTS5 indexing every row) is most
of the lib lane's time, and an edit of vipune's search cannot change what was seeded. So the lane
copies each database it seeds, closed and before any search opens it, and a later search of the
same persona copies that kept store into its own scratch folder instead of seeding: a search
never opens a kept store itself (vipune's search may write: touches, FTS5 migrations).

A store is filed under a key of everything that could have written it: the lane's digest of the
vipune source it compiled but the files shown to run only at search time
(vipune_eval/vipune/lane_source.py ``seeding``; lane/vipune_sources.json lists them, with why),
the lane's own sources (its copies of the import included), its build profile, and the persona's
data and vectors (``Persona.full_digests``). Any other edit makes other keys: the personas are
seeded again.

Writers never change a store in place: the lane writes a job-private staging file, which is
flushed to disk and renamed into the folder. A job pins each store it reuses with a hard link in
its staging folder (the least recently used stores are removed beyond ``vipune.kept_stores_gb``,
by any job, at any time), and each reuse marks the store used now.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vipune_eval.core.io import log
from vipune_eval.core.persona import Persona

SUFFIX = ".db"


@dataclass
class KeptStores:
    """One job's use of the kept stores: which personas it reuses, which it keeps."""

    folder: Path    # the stores: <key>.db
    identity: str   # what seeded them: the lane's seeding digest, its own sources, its profile
    staging: Path   # the job's: links to the stores it reuses, the stores it keeps until placed
    limit: int      # bytes the folder may hold (the least recently used removed beyond)
    plans: dict[str, dict[str, str]] = field(default_factory=dict)  # question id → the header's keys
    reused: int = 0
    kept: int = 0

    @classmethod
    def for_lane(cls, built: dict[str, Any], folder: Path, staging: Path, limit_gb: float) -> KeptStores | None:
        """The kept stores of a lane (``built``: what ``vipune-lane version`` says), or None where
        none are kept: ``limit_gb`` 0 (vipune.kept_stores_gb), or a lane that records no seeding
        digest (it could not say what wrote its stores)."""
        if limit_gb <= 0:
            return None
        seeding = (built.get("sources") or {}).get("seeding")
        if not seeding or not seeding.get("sha256"):
            log.info("vipune-lib: this vipune-lane records no digest of what seeds its databases "
                     "(`vipune-lane version`, sources.seeding): every persona is seeded afresh")
            return None
        if seeding.get("changed"):
            log.info("vipune-lib: kept stores are reused only for the same vipune source: %s differ from the "
                     "bytes lane/vipune_sources.json's search-only list was read from (seeding.seeding_files)",
                     ", ".join(seeding["changed"]))
        identity = hashlib.sha256(json.dumps({"seeding": seeding["sha256"], "lane_source": built.get("lane_source"),
                                              "profile": built.get("profile")}, sort_keys=True).encode()).hexdigest()
        folder.mkdir(parents=True, exist_ok=True)
        staging.mkdir(parents=True, exist_ok=True)
        return cls(folder, identity, staging, int(limit_gb * 1e9))

    def key(self, persona: Persona) -> str:
        data, vectors = persona.full_digests()
        return hashlib.sha256(f"{self.identity}\n{data}\n{vectors}".encode()).hexdigest()

    def plan(self, persona: Persona) -> dict[str, str]:
        """What the lane's header says of this persona: ``seeded`` (a kept store, pinned in the
        staging folder) or ``keep`` (where the lane copies the database it seeds). The same on
        every ask (a persona searched again)."""
        qid = persona.question_id
        if qid not in self.plans:
            key = self.key(persona)
            staged = self.staging / f"{key}{SUFFIX}"
            self.plans[qid] = {"seeded": str(staged)} if _pin(self.folder / f"{key}{SUFFIX}", staged) \
                else {"keep": str(staged)}
            self.reused += "seeded" in self.plans[qid]
        return self.plans[qid]

    def answered(self, persona: Persona, answer: dict[str, Any]) -> None:
        """A searched persona: the database the lane seeded for it becomes a kept store."""
        staged = self.plans.get(persona.question_id, {}).get("keep")
        if staged is None:
            return
        if "keep_error" in answer:
            log.warning("vipune-lib: persona %s's database is not kept: %s", persona.question_id, answer["keep_error"])
            return
        try:
            _place(Path(staged), self.folder / Path(staged).name)
            self.kept += 1
        except OSError as exc:  # a full disk: the search itself is done
            log.warning("vipune-lib: persona %s's database is not kept (%s): %s", persona.question_id,
                        self.folder, exc.strerror or exc)

    def close(self) -> None:
        """The job's staging folder removed, and the folder held to its limit."""
        shutil.rmtree(self.staging, ignore_errors=True)
        removed, freed = evict(self.folder, self.limit)
        log.info("vipune-lib: kept stores: %d reused, %d kept; %s holds %.2f GB%s", self.reused, self.kept,
                 self.folder, size(self.folder) / 1e9,
                 f" ({removed} least recently used removed: {freed / 1e9:.2f} GB over vipune.kept_stores_gb)"
                 if removed else "")


def _pin(store: Path, staged: Path) -> bool:
    """A hard link to ``store`` at ``staged`` (a copy where the two are on different file systems),
    the store marked used now; False where there is no such store."""
    try:
        os.link(store, staged)
    except FileExistsError:
        pass
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        try:
            shutil.copyfile(store, staged)
        except FileNotFoundError:
            return False
    try:
        os.utime(store)
    except FileNotFoundError:
        pass  # removed since: the pinned copy is still whole
    return True


def _place(staged: Path, store: Path) -> None:
    """``staged`` flushed to disk and renamed to ``store`` (copied where they are on different
    file systems): a store under its name is always whole, whatever stops the job."""
    with open(staged, "rb") as f:
        os.fsync(f.fileno())
    try:
        os.replace(staged, store)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        part = store.with_name(f".{store.name}.{os.getpid()}.part")
        shutil.copyfile(staged, part)
        with open(part, "rb") as f:
            os.fsync(f.fileno())
        os.replace(part, store)


def stores(folder: Path) -> list[os.DirEntry]:
    try:
        return [e for e in os.scandir(folder) if e.name.endswith(SUFFIX) and not e.name.startswith(".")]
    except FileNotFoundError:
        return []


def size(folder: Path) -> int:
    """Bytes the kept stores in ``folder`` take."""
    total = 0
    for entry in stores(folder):
        try:
            total += entry.stat().st_size
        except FileNotFoundError:
            pass
    return total


def evict(folder: Path, limit: int) -> tuple[int, int]:
    """Remove the least recently used stores until ``folder`` holds at most ``limit`` bytes:
    (stores removed, bytes freed). Another job may remove the same ones at the same time."""
    found = []
    for entry in stores(folder):
        try:
            stat = entry.stat()
        except FileNotFoundError:
            continue
        found.append((stat.st_mtime, entry.name, stat.st_size))
    total = sum(s for _, _, s in found)
    removed = freed = 0
    for _, name, bytes_ in sorted(found):
        if total <= limit:
            break
        try:
            (folder / name).unlink()
            removed += 1
            freed += bytes_
        except FileNotFoundError:
            pass
        total -= bytes_
    return removed, freed
