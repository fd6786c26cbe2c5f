"""Kept stores: each persona's database as the lib lane seeded it, kept and reused while nothing
that could have written it changed.

Seeding a persona (vipune's ``Database::open`` and its inserts, FTS5 indexing every row) is most
of the lib lane's time, and an edit of vipune's search cannot change what was seeded. So the vipune-lane
copies each database it seeds, closed and before any search opens it, and a later search of the
same persona copies that kept store into its own scratch folder instead of seeding: a search
never opens a kept store itself (vipune's search may write: touches, FTS5 migrations).

A store is filed under a key of everything that could have written it: the vipune-lane's digest of the
vipune source it compiled but the files shown to run only at search time
(vipune_eval/vipune/lane_source.py ``seeding``; lane/vipune_sources.json lists them, with why),
the vipune-lane's own sources (its copies of the import included), its build profile, and the persona's
data and vectors (``Persona.full_digests``). Any other edit makes other keys: the personas are
seeded again.

Writers never change a store in place: the vipune-lane writes a job-private staging file, which is
flushed to disk and renamed into the folder. A job pins each store it reuses with a hard link in
its staging folder (the least recently used stores are removed beyond ``vipune.kept_stores_gb``,
by any job, at any time), and each reuse marks the store used now.

A persona whose store is kept needs none of its rows' texts and vectors, only its digests (its
store's key, and what the run records it searched) and its question's vector: those of a shard's
personas are kept beside the stores (``digests/``), under the sha256 of the bytes of the shard's
inputs and of the code that makes the personas, so a search of kept stores reads no texts.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from vipune_eval.core import persona as persona_code
from vipune_eval.core.io import log, sha256_file
from vipune_eval.core.persona import Persona, ShardSearch, pair_at, personas_of_pairs, row_id, shard_rows

SUFFIX = ".db"
DIGESTS = "digests"  # in the stores' folder: each shard's personas' digests and question vectors


@dataclass(frozen=True)
class Keeping:
    """Where a job keeps the seeded databases and how much of them (vipune.kept_stores_gb)."""

    kept_stores: Path  # the folder (results/.cache/stores)
    kept_stores_gb: float  # GB it may hold, the least recently used removed beyond; 0: none kept


@dataclass
class KeptStores:
    """One job's use of the kept stores: which personas it reuses, which it keeps."""

    folder: Path  # the stores: <key>.db
    identity: str  # what seeded them: the vipune-lane's seeding digest, its own sources, its profile
    staging: Path  # the job's: links to the stores it reuses, the stores it keeps until placed
    limit: int  # bytes the folder may hold (the least recently used removed beyond)
    plans: dict[str, dict[str, str]] = field(default_factory=dict)  # question id → the header's keys
    # question id → (full digests, question tokens, question vector) of each persona made in full
    learned: dict[str, tuple[list[str], int, np.ndarray]] = field(default_factory=dict)
    reused: int = 0
    kept: int = 0

    @classmethod
    def for_lane(cls, built: dict[str, Any], keeping: Keeping, staging: Path) -> KeptStores | None:
        """The kept stores of a lane (``built``: what ``vipune-lane version`` says) for a job whose
        ``staging`` folder is its own, or None where none are kept: 0 GB (vipune.kept_stores_gb),
        or a lane that records no seeding digest (it could not say what wrote its stores)."""
        if keeping.kept_stores_gb <= 0:
            return None
        seeding = (built.get("sources") or {}).get("seeding")
        if not seeding or not seeding.get("sha256"):
            log.info(
                "vipune-lib: this vipune-lane records no digest of what seeds its databases "
                "(`vipune-lane version`, sources.seeding): every persona is seeded afresh"
            )
            return None
        if seeding.get("changed"):
            log.info(
                "vipune-lib: kept stores are reused only for the same vipune source: %s differ from the "
                "bytes lane/vipune_sources.json's search-only list was read from (seeding.seeding_files)",
                ", ".join(seeding["changed"]),
            )
        identity = hashlib.sha256(
            json.dumps(
                {
                    "seeding": seeding["sha256"],
                    "lane_source": built.get("lane_source"),
                    "profile": built.get("profile"),
                },
                sort_keys=True,
            ).encode()
        ).hexdigest()
        keeping.kept_stores.mkdir(parents=True, exist_ok=True)
        staging.mkdir(parents=True, exist_ok=True)
        return cls(keeping.kept_stores, identity, staging, int(keeping.kept_stores_gb * 1e9))

    def personas(self, shard: ShardSearch) -> Iterator[Persona]:
        """The shard's personas, in its order: each whose digests were kept and whose store is
        kept, made without its rows (no texts or vectors read); the others in full."""
        pairs = shard_rows(shard.rows, shard.shard, shard.shards)
        known_file, inputs = self.digests_file(shard), _inputs(shard)
        known = _read_digests(known_file, inputs)
        light: dict[str, Persona] = {}
        for i in range(pairs.num_rows):
            pair = pair_at(pairs, i)
            if pair["question_id"] in known:
                persona = _without_rows(pair, *known[pair["question_id"]])
                if "seeded" in self.plan(persona):
                    light[persona.question_id] = persona
        order = pairs.column("question_id").to_pylist()
        rest = [pairs.slice(i, 1) for i, qid in enumerate(order) if qid not in light]
        full = personas_of_pairs(
            pa.concat_tables(rest) if rest else pairs.slice(0, 0), shard.texts, list(shard.embeddings)
        )
        for qid in order:
            yield light[qid] if qid in light else next(full)
        if any(qid not in known for qid in self.learned):
            _write_digests(known_file, inputs, {**known, **self.learned})

    def digests_file(self, shard: ShardSearch) -> Path:
        """Where the digests of a shard's personas are kept (one file per view and shard)."""
        name = hashlib.sha256(f"{Path(shard.rows).resolve()}\n{shard.shard}/{shard.shards}".encode()).hexdigest()
        return self.folder / DIGESTS / f"{name[:16]}.npz"

    def key(self, persona: Persona) -> str:
        data, vectors = persona.full_digests()
        return hashlib.sha256(f"{self.identity}\n{data}\n{vectors}".encode()).hexdigest()

    def plan(self, persona: Persona) -> dict[str, str]:
        """What the vipune-lane's header says of this persona: ``seeded`` (a kept store, pinned in the
        staging folder) or ``keep`` (where the vipune-lane copies the database it seeds). The same on
        every ask (a persona searched again)."""
        qid = persona.question_id
        if qid not in self.plans:
            if persona.texts or not persona.row_ids:  # made in full: its digests are worth keeping
                self.learned[qid] = (persona.full_digests(), int(persona.query_tokens or 0), persona.query_vector)
            key = self.key(persona)
            staged = self.staging / f"{key}{SUFFIX}"
            self.plans[qid] = (
                {"seeded": str(staged)} if _pin(self.folder / f"{key}{SUFFIX}", staged) else {"keep": str(staged)}
            )
            self.reused += "seeded" in self.plans[qid]
        return self.plans[qid]

    def answered(self, persona: Persona, answer: dict[str, Any]) -> None:
        """A searched persona: the database the vipune-lane seeded for it becomes a kept store."""
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
            log.warning(
                "vipune-lib: persona %s's database is not kept (%s): %s",
                persona.question_id,
                self.folder,
                exc.strerror or exc,
            )

    def close(self) -> None:
        """The job's staging folder removed, and the folder held to its limit."""
        shutil.rmtree(self.staging, ignore_errors=True)
        removed, freed = evict(self.folder, self.limit)
        log.info(
            "vipune-lib: kept stores: %d reused, %d kept; %s holds %.2f GB%s",
            self.reused,
            self.kept,
            self.folder,
            size(self.folder) / 1e9,
            f" ({removed} least recently used removed: {freed / 1e9:.2f} GB over vipune.kept_stores_gb)"
            if removed
            else "",
        )


def _inputs(shard: ShardSearch) -> str:
    """sha256 of what a shard's personas are made from: its inputs' bytes, and the code making them."""
    digest = hashlib.sha256(Path(persona_code.__file__).read_bytes())
    for path in [shard.rows, shard.texts, *shard.embeddings]:
        digest.update(sha256_file(path).encode())
    return digest.hexdigest()


def _read_digests(path: Path, inputs: str) -> dict[str, tuple[list[str], int, np.ndarray]]:
    """Question id → (its full digests, its question's tokens and vector), kept for these inputs."""
    try:
        with np.load(path, allow_pickle=False) as kept:
            if str(kept["inputs"]) != inputs:
                return {}
            return {
                str(q): ([str(d), str(v)], int(t), kept["queries"][i])
                for i, (q, d, v, t) in enumerate(zip(kept["qids"], kept["data"], kept["vectors"], kept["tokens"]))
            }
    except (OSError, KeyError, ValueError):
        return {}


def _write_digests(path: Path, inputs: str, rows: dict[str, tuple[list[str], int, np.ndarray]]) -> None:
    """Keep the digests of a shard's personas, with their questions' tokens and vectors."""
    qids = sorted(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        with open(part, "wb") as out:
            np.savez(
                out,
                inputs=np.array(inputs),
                qids=np.array(qids),
                data=np.array([rows[q][0][0] for q in qids]),
                vectors=np.array([rows[q][0][1] for q in qids]),
                tokens=np.array([rows[q][1] for q in qids]),
                queries=np.stack([np.asarray(rows[q][2], "<f4") for q in qids]),
            )
        os.replace(part, path)
    except OSError as exc:  # a full disk: the next search reads the texts again
        part.unlink(missing_ok=True)
        log.warning("vipune-lib: the personas' digests are not kept (%s): %s", path, exc.strerror or exc)


def _without_rows(pair: dict[str, Any], digests: list[str], tokens: int, query: np.ndarray) -> Persona:
    """A persona made without its rows' texts and vectors (its kept store holds them): what a
    search of it needs, and the digests its rows had."""
    qid = pair["question_id"]
    persona = Persona(
        question_id=qid,
        question=pair["question"],
        row_ids=[row_id(qid, k) for k in pair["row_keys"]],
        session_ids=pair["row_sessions"],
        created_at=pair["row_created_at"],
        texts=[],
        vectors=np.empty((0, len(query)), np.float32),
        query_vector=query,
        docs=pair["row_docs"],
        query_tokens=tokens,
    )
    persona.known_digests = digests
    return persona


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
