"""One content-addressed vector store shared by every view: text id × model fingerprint.

Layout under the store root (``results/vectors`` in the workflow)::

    <model key>/parts/<job>-<n>.parquet   immutable: text_id, embedding, tokens
    <model key>/damaged/<job>-<n>.parquet a part that could not be read, set aside (kept to look at)
    <model key>/claims/<job>.json         ids a running job is embedding (flock held while it runs)
    <model key>/.lock                     held for the moment a job reads the store and claims

A job first claims, under the store lock, the texts it wants that are neither stored nor
claimed by a live job; it embeds only those, writes them as part files (temporary name, then
rename), and finally waits for the texts other jobs claimed. A claim is live while its job holds
an flock on the claim file, so a killed job's claim lapses by itself and its texts are claimed
again. Each unique text is therefore embedded once whatever the job order, and because batches
hold only texts of one token length (see ``embed.token_batches``), a stored vector does not
depend on which job computed it.

Parts carry Parquet page checksums. A job checks a part when it first opens it (its footer, its
columns, its text ids) and again when it reads its vectors (every page's checksum). A damaged one
(cut short by a crash before its bytes reached the disk, a full disk, a partial copy, a flipped
bit) is moved to ``damaged/`` with a warning naming it, and its texts count as not stored: the job
claims and embeds them again, so a rerun repairs the store instead of failing on it for ever (or
serving a wrong vector).

flock works on local disks and on NFS (Linux maps it to POSIX locks there); a file system without
locks makes ``fcntl.flock`` raise, which names the store folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from vipune_eval.core.io import atomic_path, log
from vipune_eval.errors import EvalError

PART_COLUMNS = ["text_id", "embedding", "tokens"]


class DamagedPart(Exception):
    """A part failed its checks while its vectors were read: it was set aside and its texts are
    no longer stored (``get`` raises it after reading the others; embed them, then ask again)."""


def part_schema(dim: int) -> pa.Schema:
    return pa.schema([("text_id", pa.string()), ("embedding", pa.list_(pa.float32(), dim)), ("tokens", pa.int32())])


@contextlib.contextmanager
def _flocked(path: Path, blocking: bool = True) -> Iterator[bool]:
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        except OSError as exc:
            raise EvalError(
                f"cannot lock {path} ({exc}): the vector store needs a file system with "
                "locks (flock); put it on a local or NFS disk"
            ) from exc
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class VectorStore:
    """The vectors of one model (``model_key``) under ``root``."""

    def __init__(self, root: Path, model_key: str, dim: int) -> None:
        self.folder = Path(root) / model_key
        self.parts, self.claims = self.folder / "parts", self.folder / "claims"
        self.parts.mkdir(parents=True, exist_ok=True)
        self.claims.mkdir(parents=True, exist_ok=True)
        self.dim = dim
        self.job = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self._written = 0
        self._claim_handle: TextIO | None = None
        self._part_ids: dict[str, set[str]] = {}  # parts are written once: each is read once

    def stored_ids(self) -> set[str]:
        for part in sorted(self.parts.glob("*.parquet")):
            if part.name not in self._part_ids:
                ids = self._open_part(part)
                if ids is not None:
                    self._part_ids[part.name] = ids
        return set().union(*self._part_ids.values())

    def _open_part(self, part: Path) -> set[str] | None:
        """The text ids of a part, its footer and columns checked; None for a damaged part, set aside."""
        try:
            opened = pq.ParquetFile(part, page_checksum_verification=True)
            schema = opened.schema_arrow
            vectors = schema.field("embedding").type if "embedding" in schema.names else None
            fits = (
                schema.names == PART_COLUMNS
                and vectors is not None
                and pa.types.is_fixed_size_list(vectors)
                and vectors.list_size == self.dim
                and vectors.value_type == pa.float32()
            )
            if fits:
                return set(opened.read(columns=["text_id"]).column("text_id").to_pylist())
            problem = f"its columns are not the store's: {schema.remove_metadata()}"
        except FileNotFoundError:  # another job set it aside a moment ago
            return None
        except (OSError, pa.ArrowException) as exc:  # no Parquet footer, a failed page checksum...
            problem = str(exc).splitlines()[0][:300]
        self._set_aside(part, problem)
        return None

    def _set_aside(self, part: Path, problem: str) -> None:
        aside = self.folder / "damaged" / part.name
        aside.parent.mkdir(exist_ok=True)
        with contextlib.suppress(FileNotFoundError):  # another job was first
            part.replace(aside)
        log.warning(
            "vector store %s: part %s is damaged (%s); set aside as %s, its texts are embedded again",
            self.folder,
            part.name,
            problem,
            aside,
        )

    def _live_claims(self) -> dict[Path, set[str]]:
        """Claims of running jobs; a claim whose job died (its flock free) is removed."""
        live = {}
        for claim in sorted(self.claims.glob("*.json")):
            if claim.name == f"{self.job}.json":
                continue
            with _flocked(claim, blocking=False) as free:
                if free:  # its job is gone: the texts are unclaimed again
                    claim.unlink(missing_ok=True)
                    continue
            try:
                live[claim] = set(json.loads(claim.read_text(encoding="utf-8")))
            except (OSError, json.JSONDecodeError):  # being written under the store lock: not yet
                live[claim] = set()
        return live

    def claim(self, wanted: set[str]) -> tuple[set[str], set[str], list[Path]]:
        """(texts this job must embed, texts already stored, claim files of jobs embedding others)."""
        with _flocked(self.folder / ".lock"):
            stored = self.stored_ids() & wanted
            live = self._live_claims()
            theirs = set().union(*live.values()) & (wanted - stored) if live else set()
            mine = wanted - stored - theirs
            if mine:
                self._hold_claim(mine)
        return mine, stored, [c for c, ids in live.items() if ids & theirs]

    def _hold_claim(self, ids: set[str]) -> None:
        path = self.claims / f"{self.job}.json"
        handle = open(path, "a+")
        fcntl.flock(handle, fcntl.LOCK_EX)  # held until release(): others see a live claim
        handle.truncate(0)
        handle.write(json.dumps(sorted(ids)))
        handle.flush()
        self._claim_handle = handle

    def release(self) -> None:
        if self._claim_handle is not None:
            (self.claims / f"{self.job}.json").unlink(missing_ok=True)
            fcntl.flock(self._claim_handle, fcntl.LOCK_UN)
            self._claim_handle.close()
            self._claim_handle = None

    def wait_for(self, claims: list[Path]) -> None:
        """Block until the jobs holding ``claims`` finish (or die)."""
        for claim in claims:
            if claim.exists():
                with _flocked(claim):
                    pass

    def put(self, ids: list[str], vectors: np.ndarray, tokens: np.ndarray) -> None:
        """Store vectors as one immutable part file (renamed into place when complete)."""
        if not ids:
            return
        out = self.parts / f"{self.job}-{self._written:05d}.parquet"
        self._written += 1
        with atomic_path(out) as tmp:
            pq.write_table(
                pa.table(
                    {
                        "text_id": ids,
                        "embedding": pa.FixedSizeListArray.from_arrays(
                            pa.array(np.asarray(vectors, np.float32).ravel()), self.dim
                        ),
                        "tokens": pa.array(np.asarray(tokens), pa.int32()),
                    },
                    schema=part_schema(self.dim),
                ),
                tmp,
                write_page_checksum=True,
            )

    def get(self, ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(vectors, tokens) of ``ids``, in their order; every id must be stored. Raises
        DamagedPart when a part failed its page checksums (it is set aside)."""
        index = {tid: i for i, tid in enumerate(ids)}
        vectors = np.zeros((len(ids), self.dim), dtype=np.float32)
        tokens = np.zeros(len(ids), dtype=np.int32)
        found = np.zeros(len(ids), dtype=bool)
        damaged = []
        self.stored_ids()  # which part holds which ids
        wanted = pa.array(ids, pa.string())
        for name, held in sorted(self._part_ids.items()):
            if held.isdisjoint(index):
                continue
            try:  # a part is a few MB: read it whole, every page's checksum verified
                table = pq.ParquetFile(self.parts / name, page_checksum_verification=True).read(columns=PART_COLUMNS)
            except (OSError, pa.ArrowException) as exc:
                del self._part_ids[name]
                self._set_aside(self.parts / name, str(exc).splitlines()[0][:300])
                damaged.append(name)
                continue
            table = table.filter(pc.is_in(table.column("text_id"), wanted))
            if not table.num_rows:
                continue
            column = table.column("embedding").combine_chunks()
            matrix = column.values.to_numpy(zero_copy_only=False).reshape(-1, self.dim)
            rows = [index[t] for t in table.column("text_id").to_pylist()]
            vectors[rows], tokens[rows], found[rows] = matrix, table.column("tokens").to_numpy(), True
        if damaged:
            raise DamagedPart(damaged)
        if not found.all():
            missing = [ids[i] for i in np.flatnonzero(~found)[:3]]
            raise EvalError(
                f"vector store {self.folder}: no vector for text(s) {missing}; a job that "
                "claimed them failed: rerun the embed stage"
            )
        return vectors, tokens

    def report(self, computed: int, stored: int, waited: int) -> None:
        log.info(
            "vector store %s: %d texts embedded here, %d already stored, %d embedded by concurrent jobs",
            self.folder,
            computed,
            stored,
            waited,
        )
