"""The vipune client: every command line the harness sends to the binary, in one place.

The binary's behaviour this relies on is written down in docs/vipune-contract.md. Every call
runs with a private HOME and config directory (vipune creates ``~/.vipune`` and opens a
database before any command, ``version`` included, and reads its config from the platform
config directory, which on macOS lives under HOME), no ``VIPUNE_*`` variables, the harness's
own model cache as HF_HOME, and ``--db-path`` to a throwaway database.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vipune_eval.core.process import kill_group, shown
from vipune_eval.errors import EvalError


class VipuneError(EvalError):
    """A vipune call failed; the message names the caller, the command line and stderr.
    ``exit_code``: the code vipune failed the call with (None where it did not exit with one: it
    was killed, hung, or exited 0 with an answer out of contract); ``error``: vipune's own message,
    its --json ``{"error"}`` or else its stderr (None where it said nothing); ``timeout``: the
    seconds it was given where it was killed for taking longer. A failed pair records them as
    fields (core.failed_pair)."""

    def __init__(
        self,
        message: str,
        fix: str | None = None,
        exit_code: int | None = None,
        error: str | None = None,
        timeout: float | None = None,
    ):
        super().__init__(message, fix)
        self.exit_code, self.error, self.timeout = exit_code, error, timeout


# vipune's hub client (Rust hf-hub over ureq) has no offline switch but honours the proxy
# variables: pointed at a closed local port, a request for a file the cache lacks fails at once
# ("Connection refused") instead of downloading, or waiting on DNS.
NO_NETWORK_PROXY = "http://127.0.0.1:9"
PROXY_VARIABLES = ("ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")


def isolated_env(home: Path, hf_home: Path | None = None) -> dict[str, str]:
    """vipune's environment: a private HOME and XDG folders, no VIPUNE_* variables, and with
    ``hf_home`` the model cache where every release looks (``$HF_HOME`` from 0.20.2, and
    ``$HOME/.cache/huggingface`` before it, linked to the same folder) and no network."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIPUNE_") and k not in ("NO_PROXY", "no_proxy")}
    home = home.resolve()
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
    )
    if hf_home is not None:
        hf_home = hf_home.resolve()
        legacy = home / ".cache" / "huggingface"
        if not (legacy.is_symlink() and legacy.resolve() == hf_home):
            legacy.parent.mkdir(parents=True, exist_ok=True)
            if legacy.is_dir() and not legacy.is_symlink():  # a private HOME's leftovers
                shutil.rmtree(legacy)
            legacy.unlink(missing_ok=True)
            legacy.symlink_to(hf_home, target_is_directory=True)
        env.update(HF_HOME=str(hf_home), HF_HUB_OFFLINE="1", **dict.fromkeys(PROXY_VARIABLES, NO_NETWORK_PROXY))
    return env


@dataclass
class Completed:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


class Vipune:
    """One binary, run with an isolated environment rooted at ``home``. ``shown``: the path its
    messages name where ``binary`` is a job's private copy of it (vipune.binary.planned_binary)."""

    def __init__(
        self, binary: Path, home: Path, timeout: float, hf_home: Path | None = None, shown: Path | None = None
    ) -> None:
        self.binary, self.home, self.timeout, self.hf_home = Path(binary), Path(home), timeout, hf_home
        self.shown = Path(shown or binary)
        self.env = isolated_env(self.home, hf_home)

    # ------------------------------------------------------------ running
    def run(self, args: list[str], where: str) -> Completed:
        """Run ``vipune ARGS``; raise VipuneError only when it cannot start or hangs.

        The binary runs in a session of its own, so a timeout kills a wrapper script's children
        too (a shell wrapper around a build directory is common).
        """
        cmd = [str(self.shown), *args]  # as the messages show it; the run is of self.binary
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(
                [str(self.binary), *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
            )
        except (OSError, ValueError) as exc:  # ValueError: an argument holds a NUL byte
            copy = (
                f" (the job's copy of it, {self.binary}: is its folder on a noexec mount?)"
                if self.shown != self.binary
                else ""
            )
            raise VipuneError(f"{where}: cannot run `{shown(cmd)}`{copy}: {exc}") from exc
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            out, err = proc.communicate()
            raise VipuneError(
                f"{where}: `{shown(cmd)}` did not finish within {self.timeout:g} s (vipune.timeout) "
                f"and was killed with its children; stdout: {_text(out)[:300]!r} stderr: "
                f"{_text(err)[-300:]!r}",
                timeout=self.timeout,
            ) from None
        return Completed(cmd, proc.returncode, _text(out), _text(err), time.perf_counter() - start)

    def call(self, args: list[str], where: str) -> Any:
        """Run ``vipune --json ARGS``-style commands; return the parsed JSON or raise VipuneError."""
        proc = self.run(args, where)
        head = f"{where}: `{shown(proc.args)}` exited {proc.returncode}"
        stderr = proc.stderr.strip()[-2000:]
        if proc.returncode < 0:
            raise VipuneError(f"{head} (killed by signal {-proc.returncode}); stderr: {stderr}", error=stderr or None)
        try:
            out = json.loads(proc.stdout)
        except json.JSONDecodeError:
            out = None
        if proc.returncode != 0:
            if isinstance(out, dict) and isinstance(out.get("error"), str):
                message = error = out["error"]
            else:
                message, error = f"stdout: {proc.stdout.strip()[:500]!r}", stderr or None
            fix = None
            if self.hf_home is not None and "download" in message.lower():
                fix = (
                    f"vipune did not find its model where the harness laid it out ({self.hf_home}, "
                    "also linked as HOME/.cache/huggingface) and went to the hub, which every "
                    "evaluation call is kept from: does this vipune embed with another model or "
                    "revision than model.repo_id / model.revision name? (docs/vipune-contract.md)"
                )
            raise VipuneError(f"{head}: {message}; stderr: {stderr}", fix=fix, exit_code=proc.returncode, error=error)
        if not isinstance(out, dict):
            raise VipuneError(f"{head} but its stdout is not a JSON object: {proc.stdout[:300]!r}; stderr: {stderr}")
        return out

    # ------------------------------------------------------------ commands
    def version(self, where: str) -> str:
        """``vipune --json version`` (against a throwaway database: every command opens one)."""
        db = self.home / "version.db"
        proc = self.run(["--db-path", str(db), "--json", "version"], where)
        try:
            version = json.loads(proc.stdout).get("version")
        except (json.JSONDecodeError, AttributeError):
            version = None
        if proc.returncode != 0 or not isinstance(version, str) or not version:
            raise VipuneError(
                f"{where}: `{shown(proc.args)}` did not print vipune's version JSON "
                f"(exit code {proc.returncode} after {proc.seconds:.1f} s); stdout: "
                f"{proc.stdout.strip()[:300]!r} stderr: {proc.stderr.strip()[-300:]!r}. Is "
                f"vipune.binary a working vipune? Try it by hand: `{shown(proc.args)}`"
            )
        return version

    def has_command(self, name: str, where: str) -> bool:
        return self.run([name, "--help"], where).returncode == 0

    def import_file(self, db: Path, jsonl: Path, where: str) -> dict[str, Any]:
        return self.call(["--db-path", str(db), "--json", "import", str(jsonl)], where)

    def search_args(self, db: Path, project: str, query: str, flags: list[str]) -> list[str]:
        """``flags``: VipuneSettings.search_flags. --project=ID: an id starting with '-' must not
        read as a flag; '--' before the query."""
        return ["--db-path", str(db), f"--project={project}", "--json", "search", *flags, "--", query]

    def search(
        self, db: Path, project: str, query: str, flags: list[str], limit: int, where: str
    ) -> tuple[list[dict[str, Any]], float]:
        """One search; the hits (checked for shape and against ``limit``, the ``--limit`` the flags
        give) and the call's seconds."""
        args = self.search_args(db, project, query, flags)
        start = time.perf_counter()
        out = self.call(args, where)
        seconds = time.perf_counter() - start
        hits = out.get("results")
        command = shown([str(self.shown), *args])
        if not isinstance(hits, list) or not all(isinstance(h, dict) for h in hits):
            raise VipuneError(f"{where}: `{command}`: the output has no 'results' list of objects: {str(out)[:300]}")
        if len(hits) > limit:
            raise VipuneError(
                f"{where}: `{command}` returned {len(hits)} results, more than --limit {limit} (a contract violation)"
            )
        return hits, seconds

    def add(self, db: Path, project: str, text: str, where: str) -> dict[str, Any]:
        return self.call(["--db-path", str(db), f"--project={project}", "--json", "add", "--force", "--", text], where)

    def export(self, db: Path, out: Path, where: str) -> dict[str, Any]:
        return self.call(["--db-path", str(db), "--json", "export", str(out)], where)

    def doctor_fts(self, db: Path, where: str) -> dict[str, Any]:
        return self.call(["--db-path", str(db), "--json", "doctor", "--fts"], where)


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")
