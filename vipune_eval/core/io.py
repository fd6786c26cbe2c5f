"""Small file helpers shared by every stage: atomic writes, hashing, JSON, progress."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vipune_eval.errors import EvalError

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("vipune_eval")
_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it into place only on success.

    A killed or failed job never leaves a file that looks complete.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~_UMASK)  # mkstemp makes 0600; results are ordinary files
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def non_finite(obj: Any, where: str = "") -> tuple[str, float] | None:
    """The first NaN or infinity in ``obj``: (its dotted key, e.g. ``a.b[1]``, the number)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return where, obj
    items = (
        obj.items()
        if isinstance(obj, dict)
        else ((f"[{i}]", v) for i, v in enumerate(obj))
        if isinstance(obj, (list, tuple))
        else ()
    )
    for key, value in items:
        key = str(key)
        found = non_finite(value, where + key if key.startswith("[") or not where else f"{where}.{key}")
        if found:
            return found
    return None


def dump_json(obj: Any, path: str | os.PathLike[str] = "JSON") -> str:
    """Strict JSON (RFC 8259): a NaN or an infinity is an error naming ``path`` and its key,
    never the bare ``NaN`` / ``Infinity`` tokens strict parsers reject."""
    try:
        return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    except ValueError:
        found = non_finite(obj)
        if found is None:
            raise
        key, value = found
        raise EvalError(
            f"{path}: {key or 'the value'} is {value!r}, not a finite number: strict JSON has no NaN or infinity",
            fix="a bug of the stage that computed it (please report it); a "
            "non-finite config value is refused before any job runs",
        ) from None


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    write_text(path, dump_json(obj, path))


def write_json_if_changed(path: str | os.PathLike[str], obj: Any) -> bool:
    """Write ``obj`` only when the file's text would change (keeps mtime for Snakemake)."""
    text = dump_json(obj, path)
    path = Path(path)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    write_text(path, text)
    return True


def read_json(path: str | os.PathLike[str]) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise EvalError(f"cannot read JSON file {path}: {exc}") from exc


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def planned_copy(path: Path, fingerprint: Path, what: str, folder: Path) -> tuple[Path, dict[str, Any]]:
    """A private copy of the executable ``path`` in ``folder`` holding the bytes the fingerprint
    file names, and that fingerprint. A job's results are filed under the fingerprint, and the job
    runs the copy: each of its calls runs the planned bytes, even where ``path`` is rebuilt while
    it runs (``build.sh --checkout`` in another terminal), which would otherwise mix two builds'
    rankings in one shard. The copy's bytes are the ones checked, as they are the ones that run.
    ``what``: "binary", "vipune-lane"."""
    expected = read_json(fingerprint)
    if not path.is_file():
        raise EvalError(
            f"{path}, the {what} this job was planned for, is gone",
            fix=f"rerun snakemake so it re-plans (the {what} was removed or replaced after the run was planned)",
        )
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / path.name
    copy.unlink(missing_ok=True)
    shutil.copyfile(path, copy)
    actual = sha256_file(copy)
    if actual != expected["sha256"]:
        copy.unlink()
        raise EvalError(
            f"{path} (sha256 {actual[:12]}) is not the {what} this result belongs to "
            f"({fingerprint}, sha256 {expected['sha256'][:12]})",
            fix=f"rerun snakemake so it re-plans (the {what} changed after the run was planned)",
        )
    copy.chmod(0o500)
    return copy, expected


def text_id(text: str) -> str:
    """Content key of a text: the same text anywhere in the dataset gets the same id."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


class Progress:
    """Logs ``done / total`` and a rate at most every ``every`` seconds, and shows the same line
    on stdout at most every ``shown_every`` seconds: a job's stdout is Snakemake's terminal (its
    stderr goes to the job's log), so a long stage is seen to be alive without opening a log."""

    def __init__(self, what: str, total: int, every: float = 10.0, shown_every: float = 60.0, unit: str = "") -> None:
        self.what, self.total, self.every, self.shown_every = what, total, every, shown_every
        self.unit = f" {unit}" if unit else ""
        self.done = 0
        self.start = self.last = self.shown = time.monotonic()

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= self.every or (self.total and self.done >= self.total):
            self.last = now
            rate = self.done / max(now - self.start, 1e-9)
            eta = f", ETA {(self.total - self.done) / rate / 60:.1f} min" if self.total and rate else ""
            line = f"{self.what}: {self.done} / {self.total}{self.unit} ({rate:.1f}{self.unit}/s{eta})"
            log.info("%s", line)
            if now - self.shown >= self.shown_every:
                self.shown = now
                print(f"vipune-eval: {line}", flush=True)


def read_parquet(path: str | os.PathLike[str], columns: list[str] | None = None) -> pa.Table:
    """The table in the Parquet file ``path`` (``columns`` of it, in that order). Not
    pq.read_table: it reads through pyarrow.dataset, whose import loads pandas, ~0.3 s of CPU
    more for every job that reads a file."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as file:
        return file.read(columns=columns)


def read_rows_with_ids(path: str | os.PathLike[str], columns: list[str], keep: pa.Array | None) -> pa.Table:
    """``columns`` of the rows of ``path`` whose ``text_id`` is in ``keep`` (an Arrow string
    array; every row when None), read batch by batch: a filter on the whole file decodes all of
    it at once (text ids are hashes, so no row group's statistics can skip it)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    parts = []
    for batch in pq.ParquetFile(path).iter_batches(batch_size=4096, columns=columns):
        parts.append(batch if keep is None else batch.filter(pc.is_in(batch.column("text_id"), keep)))
    schema = pq.read_schema(path)
    return pa.Table.from_batches(parts, schema=pa.schema([schema.field(c) for c in columns]))
