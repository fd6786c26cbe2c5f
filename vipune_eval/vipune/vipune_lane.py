"""vipune-lane: vipune's own search code in one process for many personas (lane/, in Rust).

``.ci/vipune/build.sh`` builds it beside the vipune binary, from the same vipune source and
Cargo.lock, as ``vipune-lane-<sha12 of lane/>``; it records that binary's sha256, so a binary
finds its vipune-lane by name and the two are known to belong together. The protocol (one JSON line per
persona, then its vectors as raw float32; one JSON line back) is documented in lane/src/main.rs
and docs/vipune-contract.md.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import queue
import re
import subprocess
import threading
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from vipune_eval.core.build_records import LaneBuild, VipuneFingerprint, VipuneLaneFingerprint
from vipune_eval.core.io import planned_copy, sha256_file
from vipune_eval.core.process import Watchdog, kill_group, shown
from vipune_eval.errors import EvalError
from vipune_eval.vipune.lane_source import lane_name, source_sha256

if TYPE_CHECKING:  # the plan imports this module on every Snakemake start: numpy and pyarrow only where a job searches
    from vipune_eval.core.persona import Persona


class LaneError(EvalError):
    """The vipune-lane could not run, or broke its protocol; the message names the command and persona."""


# Beside a build's bin/: what .ci/vipune/build.sh built its binary from (binary_sha256, vipune_source_sha256).
BUILD_RECORD = "build.json"


def build_command(version: str) -> str:
    """The command that builds a vipune release and its vipune-lane (a checkout: ``--checkout DIR``)."""
    return f".ci/vipune/build.sh {version}"


def find_lane(binary: Path, version: str, files: Iterable[Path] = ()) -> Path:
    """The vipune-lane of this checkout's lane/ sources beside ``binary`` (its symlinks resolved), else
    beside the first of ``files`` that has one: vipune.fingerprint_files, where vipune.binary is
    a wrapper script and they name the build it runs."""
    name = lane_name(source_sha256())
    places = list(dict.fromkeys(Path(f).resolve().parent / name for f in [binary, *files]))
    found = next((path for path in places if path.is_file()), None)
    if found is None:
        raise LaneError(
            f"the vipune-lib retrievers need vipune-lane, built beside the vipune binary from the "
            f"same source: {_none_of(places)} (a lane is named after the "
            "sha256 of lane/, so an edit of lane/ needs a new build)",
            fix=f"`{build_command(version)}` builds vipune {version} and its vipune-lane and prints the "
            "binary's path: set vipune.binary to it (a checkout: `.ci/vipune/build.sh --checkout "
            "DIR`); where vipune.binary is a wrapper script, list the binary it runs in "
            "vipune.fingerprint_files (its vipune-lane is looked for beside each); or drop vipune-lib and "
            "vipune-lib-semantic from `retrievers`",
        )
    return found


def is_lane(path: Path) -> bool:
    """A vipune-lane as .ci/vipune/build.sh names it: what ``build.sh --checkout DIR --lane-only``
    prints, a build of the vipune-lane alone (no binary), which vipune.binary and vipune.compare take."""
    return re.fullmatch(r"vipune-lane-[0-9a-f]{12}", path.name) is not None


def lane_only_fingerprint(path: Path, timeout: float) -> VipuneFingerprint:
    """A lane built alone (``build.sh --lane-only``) as a build of its own: sha256 of its bytes
    and what ``vipune-lane version`` says; ``id`` = vipune version-sha12 of its bytes names its
    results, and it is its own lane (``binary``: that id, as a lane names the build it belongs to).
    A lane built beside a binary is refused: that binary is the build."""
    said = _version(path, timeout)
    if said.get("binary_sha256"):
        raise LaneError(
            f"{path} was built beside a vipune binary (sha256 {str(said['binary_sha256'])[:12]}), "
            "so that binary is its build: name the binary, not its vipune-lane",
            fix=f"set vipune.binary (or the vipune.compare entry) to the vipune beside it ({path.parent / 'vipune'})",
        )
    _check_source(path, said)
    sha = sha256_file(path)
    version = said.get("vipune") or "unknown"
    build = f"{version}-{sha[:12]}"
    return {
        "kind": "vipune-lane",
        "lane_only": True,
        "sha256": sha,
        "version": version,
        "binary": build,
        "built": said,
        "id": build,
    }


def _none_of(places: list[Path]) -> str:
    if len(places) == 1:
        return f"{places[0]} is not there"
    return f"neither {' nor '.join(map(str, places))} is there"


def lane_fingerprint(path: Path, binary: dict[str, Any], timeout: float) -> VipuneLaneFingerprint:
    """sha256 of the vipune-lane's bytes and what ``vipune-lane version`` says, checked against the
    binary's fingerprint (the vipune-lane must have been built beside those very bytes: vipune.binary's,
    or one of its vipune.fingerprint_files' where it is a wrapper script); ``id`` = vipune
    version-sha12 of (the vipune-lane's bytes, the binary's id) names its results."""
    said = _version(path, timeout)
    built_beside = {binary["sha256"], *binary.get("files", {}).values()}
    if said.get("binary_sha256") not in built_beside:
        files = binary.get("files", {})
        raise LaneError(
            f"{path} was built beside a vipune binary with sha256 {str(said.get('binary_sha256'))[:12]}, "
            f"not beside vipune.binary {binary['id']} (sha256 {binary['sha256'][:12]})"
            + (
                f" nor any of vipune.fingerprint_files ({', '.join(f'{n} {d[:12]}' for n, d in files.items())})"
                if files
                else ""
            )
            + ": its search code may not be that binary's",
            fix=f"build both again from one source: `{build_command(binary['version'])}` (a checkout: "
            "`.ci/vipune/build.sh --checkout DIR`); where vipune.binary is a wrapper script, list "
            "the binary it runs, the one built beside the vipune-lane, in vipune.fingerprint_files",
        )
    _check_source(path, said)
    sha = sha256_file(path)
    # The id names the pair (these lane bytes, that binary): results are filed under it.
    pair = hashlib.sha256(f"{sha}\n{binary['id']}".encode()).hexdigest()
    version = said.get("vipune") or binary["version"]
    return {
        "kind": "vipune-lane",
        "sha256": sha,
        "version": version,
        "binary": binary["id"],
        "built": said,
        "id": f"{version}-{pair[:12]}",
    }


def _check_source(path: Path, said: LaneBuild) -> None:
    """The vipune-lane compiled the very source its binary was built from: the digest the vipune-lane recorded
    as cargo compiled it (lane/build.rs) is the one build.sh recorded for the binary beside it
    (BUILD_RECORD, beside bin/). Not checked where either is missing: a lane of an earlier
    build.sh or the tests' fake, a build's bin/ copied elsewhere without its record (its vipune-lane is
    still checked against the binary's bytes)."""
    compiled = (said.get("sources") or {}).get("vipune_source_sha256")
    record = path.resolve().parent.parent / BUILD_RECORD
    if not compiled or not record.is_file():
        return
    try:
        built = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        built = {}
    binary, source = said.get("binary_sha256"), built.get("vipune_source_sha256")
    if source == compiled and built.get("binary_sha256") == binary:
        return
    raise LaneError(
        f"{path} compiled the vipune source with sha256 {compiled[:12]}, but the binary it was built beside "
        f"(sha256 {str(binary)[:12]}) "
        + (
            f"was built from the source with sha256 {str(source)[:12]} ({record})"
            if built.get("binary_sha256") == binary
            else f"is not the binary {record} records"
        )
        + ": the vipune-lane's search code is not that binary's",
        fix="build both again from one source: `.ci/vipune/build.sh --checkout DIR` for a checkout (its "
        "binary and lane come from the same bytes), `.ci/vipune/build.sh VERSION` for a release",
    )


def _version(path: Path, timeout: float) -> LaneBuild:
    cmd = [str(path), "version"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        said = json.loads(proc.stdout)
    except subprocess.TimeoutExpired:
        raise LaneError(
            f"`{shown(cmd)}` did not print its build within {timeout:g} s (vipune.timeout) and was killed",
            fix=f"raise vipune.timeout (now {timeout:g} s; the vipune-lane's version check takes "
            "milliseconds), or see whether the vipune-lane hangs",
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise LaneError(
            f"`{shown(cmd)}` did not print its build as JSON: {exc}",
            fix=f"build it again: `{build_command('VERSION')}`",
        ) from None
    if proc.returncode != 0 or not isinstance(said, dict) or said.get("name") != "vipune-lane":
        raise LaneError(
            f"`{shown(cmd)}` exited {proc.returncode} saying {proc.stdout[:200]!r} "
            f"{proc.stderr[-300:]!r}: not a vipune-lane",
            fix=f"build it again: `{build_command('VERSION')}`",
        )
    return cast(LaneBuild, said)  # lane/src/main.rs's version(): its keys


def planned_lane(path: Path, fingerprint: Path, folder: Path) -> Path:
    """A job's private copy (in ``folder``) of the vipune-lane it was planned for, checked against its
    fingerprint: every lane process the job starts (one per shard, another after a persona the
    vipune-lane broke on under ``record``, another on disk where RAM is full) runs the planned bytes, even
    where the vipune-lane is rebuilt while the job runs."""
    return planned_copy(path, fingerprint, "vipune-lane", folder)[0]


def frame(persona: Persona, flags: list[str], store: dict[str, str] | None = None) -> bytes:
    """One persona on the vipune-lane's stdin: its header line, then its rows' vectors and the question's.
    ``flags``: the options of the binary's search but the search kind (VipuneSettings.query_flags):
    the vipune-lane searches with the very options the binary is given. ``store``: the header's
    kept-store keys (stages.search.kept_stores): with ``seeded`` (a kept store to copy) the rows stay
    out of the frame, only the question's vector follows the header."""
    import numpy as np

    store = store or {}
    seeded = "seeded" in store
    if not seeded and len(persona.texts) != len(persona.row_ids):  # made without its rows: a kept store's
        raise LaneError(
            f"persona {persona.question_id} was made without its rows' texts, and no kept store "
            "holds them (a protocol violation of the harness itself)"
        )
    vectors = np.vstack([persona.query_vector[None, :]] if seeded else [persona.vectors, persona.query_vector[None, :]])
    header = {
        "question_id": persona.question_id,
        "question": persona.question,
        "question_tokens": persona.query_tokens,
        "flags": flags,
        "dims": int(vectors.shape[1]),
        "ids": [] if seeded else persona.row_ids,
        "contents": [] if seeded else persona.texts,
        "created_at": [] if seeded else persona.created_at,
        **store,
    }
    vectors = vectors.astype("<f4", copy=False)
    return json.dumps(header, ensure_ascii=False).encode("utf-8") + b"\n" + vectors.tobytes()


@dataclass(frozen=True)
class VipuneLane:
    """How a job runs one lane over a stream of personas."""

    lane: Path
    tmp: Path  # the per-persona databases (created and removed by the vipune-lane)
    timeout: float  # seconds the vipune-lane may take for one persona
    arms: bool = False  # answer the lists each hybrid search fused too (``fusions``, lane/src/arms.rs)
    store: Callable[[Persona], dict[str, str]] | None = None  # a persona's kept-store keys (``frame``)

    def search(
        self, personas: Iterable[Persona], flags: list[str], record: bool = False
    ) -> Generator[tuple[Persona, dict[str, Any]], None, None]:
        """Each persona with the vipune-lane's answer, in order: its rankings and timings, or ``error``:
        vipune's own message where it refuses the persona. One process for all of them. A lane
        that dies, hangs or answers out of turn on a persona is a LanePersonaError naming the
        command and that persona; with ``record`` that persona is answered with ``broken``, what
        happened, instead (and ``timeout``, the seconds it was given, where it hung) and a new lane
        goes on with the personas after it."""
        rest: Iterator[Persona] = iter(personas)
        while True:
            process = _VipuneLaneProcess(self, rest, flags)
            try:
                yield from process.answers()
                return
            except LanePersonaError as exc:
                if not record:
                    raise
                unanswered = process.stop()
                yield (
                    exc.persona,
                    {"question_id": exc.persona.question_id, "broken": exc.detail, "timeout": exc.timeout},
                )
                rest = itertools.chain(unanswered, rest)
                following = next(rest, None)  # a new lane only for a persona left: one stuck at
                if following is None:  # start would be waited on for none
                    return
                rest = itertools.chain([following], rest)
            finally:
                process.stop()


class LanePersonaError(LaneError):
    """The vipune-lane died, hung (``timeout``: the seconds it was given) or broke its protocol on ``persona``."""

    def __init__(self, persona: Persona, detail: str, fix: str, timeout: float | None = None):
        super().__init__(f"persona {persona.question_id}: {detail}", fix=fix)
        self.persona, self.detail, self.timeout = persona, detail, timeout


def _watch(proc: subprocess.Popen[bytes], cmd: list[str], tmp: Path) -> Watchdog:
    """The vipune-lane and its databases do not outlive the job: a job killed with its process group
    (the vipune-lane is in a session of its own) leaves its vipune-lane to a watchdog, which kills it with its
    children and removes ``tmp`` (/dev/shm's folder too)."""
    try:
        return Watchdog(proc, [tmp])
    except OSError as exc:
        kill_group(proc)
        proc.wait()
        raise LaneError(f"cannot start the watchdog of `{shown(cmd)}`: {exc}") from None


class _VipuneLaneProcess:
    """One vipune-lane process fed ``personas`` by a writer thread and read by a reader thread."""

    def __init__(self, run: VipuneLane, personas: Iterator[Persona], flags: list[str]):
        run.tmp.mkdir(parents=True, exist_ok=True)
        self.cmd = [str(run.lane), "search", "--tmp", str(run.tmp), *(["--arms"] if run.arms else [])]
        self.timeout = run.timeout
        self.stderr = (run.tmp / "lane.stderr").open("w+b")
        try:  # a session of its own, so a kill reaches a wrapper script's children too
            self.proc = subprocess.Popen(
                self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, start_new_session=True
            )
        except OSError as exc:
            self.stderr.close()
            raise LaneError(
                f"cannot run `{shown(self.cmd)}`: {exc}", fix=f"build it again: `{build_command('VERSION')}`"
            ) from None
        try:
            self.watchdog = _watch(self.proc, self.cmd, run.tmp)
        except LaneError:
            self.stderr.close()
            raise
        self.sent: queue.Queue[Persona | None] = queue.Queue()
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.failure: list[BaseException] = []
        self.store = run.store
        self.writer = threading.Thread(target=self._write, args=(personas, flags), daemon=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.writer.start()
        self.reader.start()

    def _write(self, personas: Iterator[Persona], flags: list[str]) -> None:
        stdin = self.proc.stdin
        assert stdin is not None  # Popen(stdin=PIPE)
        try:
            for persona in personas:
                framed = frame(persona, flags, self.store(persona) if self.store else None)
                self.sent.put(persona)  # after its frame: a persona on the queue is one the vipune-lane was sent
                stdin.write(framed)
        except BrokenPipeError:
            pass  # the vipune-lane died: the reader says how
        except BaseException as exc:  # noqa: BLE001 - reading the personas failed: re-raised by answers()
            self.failure.append(exc)
        finally:
            self.sent.put(None)
            try:
                stdin.close()
            except BrokenPipeError:
                pass

    def _read(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None  # Popen(stdout=PIPE)
        for line in stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def _stderr(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-500:]

    def answers(self) -> Iterator[tuple[Persona, dict[str, Any]]]:
        shown_cmd = shown(self.cmd)
        while (persona := self.sent.get()) is not None:
            try:
                line = self.lines.get(timeout=self.timeout)
            except queue.Empty:
                raise LanePersonaError(
                    persona,
                    f"`{shown_cmd}` gave no answer within {self.timeout:g} s (vipune.timeout); it was killed",
                    fix="raise vipune.timeout, or see whether the vipune-lane hangs on this persona",
                    timeout=self.timeout,
                ) from None
            if not line:
                if self.failure:
                    raise self.failure[0]
                self.proc.wait()
                raise LanePersonaError(
                    persona,
                    f"`{shown_cmd}` ended (exit {self.proc.returncode}) before answering; stderr: {self._stderr()!r}",
                    fix="a malformed persona or a crash of vipune's code: rerun this shard "
                    "alone to see it, and report a crash to vipune",
                )
            try:
                answer = json.loads(line)
            except json.JSONDecodeError:
                answer = None
            if not isinstance(answer, dict) or answer.get("question_id") != persona.question_id:
                raise LanePersonaError(
                    persona,
                    f"`{shown_cmd}` answered {line[:200]!r}, not this persona's JSON line (a protocol violation)",
                    fix="build the vipune-lane again from this checkout's lane/ (`.ci/vipune/build.sh`)",
                )
            yield persona, answer
        if self.failure:
            raise self.failure[0]
        try:
            code = self.proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            raise LaneError(
                f"`{shown_cmd}` did not exit within {self.timeout:g} s (vipune.timeout) after "
                "answering the last persona; it was killed",
                fix="see whether the vipune-lane hangs at the end of its input",
            ) from None
        if code != 0:
            raise LaneError(
                f"`{shown_cmd}` exited {code} after the last persona; stderr: {self._stderr()!r}",
                fix="report it to vipune with the vipune-lane's stderr",
            )

    def stop(self) -> list[Persona]:
        """End the process (killed, with its children, where it still runs) and return the personas
        it was sent and did not answer, in order."""
        if self.proc.poll() is None:
            kill_group(self.proc)
        self.watchdog.release()  # before the wait: a killed lane's pid is not reused until then
        self.proc.wait()
        self.writer.join()
        self.stderr.close()
        unanswered = []
        while not self.sent.empty():
            if (persona := self.sent.get()) is not None:
                unanswered.append(persona)
        return unanswered
