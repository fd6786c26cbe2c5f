"""Plugin retrievers: a user's own function, called once per persona (see docs/extending.md).

A ``retrievers:`` entry ``{name: mine, use: "path/to/file.py:function"}`` (a path relative to
the working directory) or ``use: "package.module:function"`` names a function called as
``function(haystack, k)`` with a frozen ``Haystack``; it returns at most ``k`` row ids, best
first, or ``(row id, score)`` pairs. The answer is checked (unknown id, repeat, more than k,
wrong type: an error naming the plugin, the question and the value; nothing is scored) and
scored like any retriever. The plugin's source bytes are part of its search job's params, so
editing it reruns its searches and what depends on them, nothing else. A call has at most
``search.plugin_timeout`` seconds; a plugin that exits (``sys.exit``, ``os._exit``) is a named
error too.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from vipune_eval.core import trec
from vipune_eval.core.io import Progress
from vipune_eval.core.persona import Persona, Ranking, ShardSearch
from vipune_eval.errors import EvalError
from vipune_eval.registry.retrievers import Kind, from_argument

log = logging.getLogger("vipune_eval")


@dataclass(frozen=True)
class Haystack:
    """One persona's haystack and question, as a plugin sees it (read-only).

    ``row_ids[i]``, ``row_sessions[i]``, ``texts[i]``, ``vectors[i]`` and ``created_at[i]``
    describe row i: its id (what the plugin returns), the dataset session it belongs to, its
    text (``role: content`` lines), its cached embedding and its RFC3339 UTC time. Vectors are
    the workflow's cached embeddings (L2-normalised float32), ``question_vector`` the question's.
    """

    question_id: str
    question: str
    question_vector: np.ndarray  # float32 [d]
    row_ids: tuple[str, ...]
    row_sessions: tuple[str, ...]
    texts: tuple[str, ...]
    vectors: np.ndarray  # float32 [n, d]
    created_at: tuple[str, ...]

    @classmethod
    def of(cls, persona: Persona) -> Haystack:
        def frozen(a: np.ndarray) -> np.ndarray:
            # A copy in immutable bytes: unlike a copy flagged read-only, which the plugin could
            # setflags(write=True) again, numpy refuses to make it writeable.
            a = np.ascontiguousarray(a, dtype=np.float32)
            return np.frombuffer(a.tobytes(), dtype=np.float32).reshape(a.shape)

        return cls(
            persona.question_id,
            persona.question,
            frozen(persona.query_vector),
            tuple(persona.row_ids),
            tuple(persona.session_ids),
            tuple(persona.texts),
            frozen(persona.vectors),
            tuple(persona.created_at),
        )


def _split(use: str) -> tuple[str, str, bool]:
    """(target, function, is_file) of a ``use`` string."""
    target, _, function = use.rpartition(":")
    is_file = target.endswith(".py") or "/" in target or os.sep in target
    return target, function, is_file


def source_file(use: str) -> Path:
    """The file holding the plugin's code (a module's file for ``package.module:function``)."""
    target, _, is_file = _split(use)
    if is_file:
        return Path(target)
    try:
        found = importlib.util.find_spec(target)
    except (ImportError, ValueError) as exc:
        raise EvalError(f"plugin {use!r}: module {target!r} cannot be found: {exc}") from None
    if found is None or not found.origin or not Path(found.origin).is_file():
        raise EvalError(f"plugin {use!r}: module {target!r} cannot be found (is it installed or on PYTHONPATH?)")
    return Path(found.origin)


def source_digest(use: str) -> str:
    """sha256 of the plugin's source: its search jobs' code version."""
    return hashlib.sha256(source_file(use).read_bytes()).hexdigest()


@contextlib.contextmanager
def _folder_on_path(use: str) -> Iterator[None]:
    """A file plugin's folder first on sys.path while it is imported and called, so a helper
    module beside it imports (docs/extending.md); then sys.path is as it was."""
    target, _, is_file = _split(use)
    if not is_file:
        yield
        return
    folder = str(Path(target).resolve().parent)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        if folder in sys.path:
            sys.path.remove(folder)


class _OutOfTime(BaseException):
    """Raised into a plugin past its time limit (a BaseException: its ``except Exception`` lets it by)."""


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Interrupt the block after ``seconds`` (SIGALRM: the main thread of a job; elsewhere, as in
    a thread, no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise _OutOfTime()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _Exited(BaseException):
    """Raised in place of ``os._exit`` called by a plugin (see ``_no_exit``)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@contextlib.contextmanager
def _no_exit() -> Iterator[None]:
    """While a plugin is imported or called, ``os._exit`` raises ``_Exited``: it would end the
    job on the spot, with no output and the plugin's exit status (0: Snakemake took the job for
    done, then missed its output). A process the plugin forks still exits as it asks."""
    real, pid = os._exit, os.getpid()

    def refuse(status: int) -> NoReturn:
        if os.getpid() != pid:
            real(status)
        raise _Exited(status)

    os._exit = refuse
    try:
        yield
    finally:
        os._exit = real


def _exit_code(exc: SystemExit | _Exited) -> str:
    if isinstance(exc, _Exited):
        return f"os._exit({exc.code!r})"
    return "sys.exit()" if exc.code is None else f"sys.exit({exc.code!r})"


@cache
def load(use: str) -> Callable[..., Any]:
    """The plugin's function, imported; every failure is an EvalError naming the plugin."""
    target, function, is_file = _split(use)
    if not target or not function.isidentifier():
        raise EvalError(f"plugin {use!r}: write 'path/to/file.py:function' or 'package.module:function'")
    try:
        if is_file:
            path = Path(target)
            if not path.is_file():
                raise EvalError(
                    f"plugin {use!r}: file {path.resolve()} not found (paths are relative to the working directory)"
                )
            name = "vipune_eval_plugin_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
            found = importlib.util.spec_from_file_location(name, path)
            if found is None or found.loader is None:
                raise EvalError(
                    f"plugin {use!r}: {path.resolve()} cannot be imported as a Python module (a file ending in .py can)"
                )
            module = importlib.util.module_from_spec(found)
            sys.modules[name] = module
            with _folder_on_path(use), _no_exit():
                found.loader.exec_module(module)
        else:
            with _no_exit():
                module = importlib.import_module(target)
    except EvalError:
        raise
    except (SystemExit, _Exited) as exc:
        raise EvalError(
            f"plugin {use!r} called {_exit_code(exc)} while it was imported",
            fix="a plugin must not exit: raise an exception instead",
        ) from None
    except BaseException as exc:  # a plugin may raise anything while importing
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise EvalError(f"plugin {use!r} cannot be imported: {type(exc).__name__}: {exc}") from None
    fn = getattr(module, function, None)
    if not callable(fn):
        raise EvalError(f"plugin {use!r}: {target} has no function {function!r}")
    return fn


def check_answer(answer: Any, persona: Persona, k: int, use: str) -> Ranking:
    """The plugin's answer as a ranking, or an EvalError naming the plugin, question and value.

    Checked against the persona's own ids, never the Haystack the plugin was given: a plugin
    can get round its freezing (``object.__setattr__``) and add ids of its own."""

    def refuse(problem: str, value: Any) -> EvalError:
        return EvalError(f"plugin {use!r}, question {persona.question_id}: {problem}: {value!r:.200}")

    if not isinstance(answer, (list, tuple)):
        raise refuse("must return a list of row ids or (row id, score) pairs", answer)
    if len(answer) > k:
        raise refuse(f"returned {len(answer)} rows, more than k = {k}", answer)
    known = set(persona.row_ids)
    ranking: Ranking = []
    seen: set[str] = set()
    for rank, item in enumerate(answer, start=1):
        if isinstance(item, str):
            rid, score = item, float(len(answer) - rank + 1)
        elif (
            isinstance(item, (list, tuple))
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], (int, float, np.number))
            and not isinstance(item[1], bool)
        ):
            rid, score = item[0], float(item[1])
        else:
            raise refuse(f"item {rank} is neither a row id nor a (row id, score) pair", item)
        if rid not in known:
            raise refuse(f"item {rank} is not a row id of this haystack", rid)
        if rid in seen:
            raise refuse(f"item {rank} repeats a row id", rid)
        seen.add(rid)
        ranking.append((rid, score))
    return ranking


def search(fn: Callable[..., Any], persona: Persona, k: int, use: str, timeout: float | None = None) -> Ranking:
    """The plugin's checked ranking of one persona, called with at most ``timeout`` seconds (no
    limit: None)."""
    haystack = Haystack.of(persona)
    where = f"plugin {use!r}, question {persona.question_id}"
    try:
        with _folder_on_path(use), _no_exit(), _time_limit(timeout):
            answer = fn(haystack, k)
    except _OutOfTime:
        raise EvalError(
            f"{where}: no answer within {timeout:g} s (search.plugin_timeout)",
            fix="make the plugin faster, or raise search.plugin_timeout (seconds per question)",
        ) from None
    except (SystemExit, _Exited) as exc:
        raise EvalError(
            f"plugin {use!r} called {_exit_code(exc)} on question {persona.question_id}",
            fix="a plugin must not exit: return a ranking, or raise an exception",
        ) from None
    except Exception as exc:
        log.error("%s", traceback.format_exc())
        raise EvalError(f"plugin {use!r}, question {persona.question_id}: raised {type(exc).__name__}: {exc}") from None
    return check_answer(answer, persona, k, use)


def run_plugin(shard: ShardSearch, retriever: str, out: Path, timeout: float) -> None:
    """A plugin's run over one shard of personas: ``k`` = the search limit, at most ``timeout``
    seconds a persona."""
    spec = from_argument(retriever)
    if spec.kind is not Kind.PLUGIN:
        raise EvalError(f"search-plugin: {retriever} is not a plugin")
    fn = load(spec.use)
    runs: list[tuple[str, list[str]]] = []
    progress = Progress(f"plugin {spec.name} {shard.name}: personas", total=shard.pair_count())
    for persona in shard.personas():
        runs.append(
            (
                persona.question_id,
                persona.documents(
                    search(fn, persona, shard.ranking_settings.limit, spec.use, timeout), shard.ranking_settings
                ),
            )
        )
        progress.advance()
    trec.write_run(out, runs, spec.name)
