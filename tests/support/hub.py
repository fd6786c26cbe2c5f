"""A local server that answers as the Hugging Face hub does, for the download code's tests.

What huggingface_hub (and our download stage) asks of the hub, served from memory:
- ``GET /api/{datasets,models}/{repo}/revision/{rev}``: the repository's info at a branch or
  commit (``HfApi().dataset_info`` / ``model_info``), ``sha`` the resolved commit;
- ``HEAD``/``GET /[datasets/]{repo}/resolve/{rev}/{file}``: a small file answered in place, a
  large one ("LFS": ``lfs_from`` bytes or more) redirected with ``302`` to a content address, the
  way the hub hands LFS files to its CDN; both with ``X-Repo-Commit``, ``ETag`` (the LFS file's
  sha256, as ``X-Linked-Etag`` on the redirect, with ``X-Linked-Size``), ``Content-Length``,
  ``Accept-Ranges`` and ``Range`` requests (``206`` with ``Content-Range``, ``416`` past the end);
- errors in the hub's shape: ``404`` with ``X-Error-Code`` ``RepoNotFound`` /
  ``RevisionNotFound`` / ``EntryNotFound``, ``X-Error-Message`` and a JSON ``{"error": ...}``
  body, which huggingface_hub maps to its named exceptions.
Faults a test can set: ``cut[file] = n`` ends the next transfer of ``file`` after ``n`` bytes
(the connection closes mid-body, Content-Length promising more), ``cut[file] = [n, m, ...]`` the
next transfers, one cut each; ``damaged[file] = bytes`` sends
those bytes instead of the file's (same headers: damage in transit); ``silent`` holds path fragments
(``"/api/"``, ``"/resolve/"``) of requests accepted and never answered (a hung server);
``trickle[file] = (n, seconds)`` sends the first ``n`` bytes of the next transfers of ``file``, then
one byte every ``seconds`` (a server that never quite stops); ``requests`` records each request
(method, path, Range header) for a test to read. Tests reach it through ``HF_ENDPOINT``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


@dataclass
class Repo:
    kind: str  # "datasets" or "models"
    repo_id: str
    commits: dict[str, dict[str, bytes]]  # commit → file → bytes
    branches: dict[str, str] = field(default_factory=dict)  # branch → commit


class Hub:
    def __init__(self, lfs_from: int = 1024) -> None:
        self.repos: dict[tuple[str, str], Repo] = {}
        self.lfs_from = lfs_from
        self.cut: dict[str, int] = {}
        self.damaged: dict[str, bytes] = {}
        self.silent: set[str] = set()
        self.trickle: dict[str, tuple[int, float]] = {}
        self.closing = threading.Event()  # ends the silent and trickling answers at exit
        self.requests: list[tuple[str, str, str | None]] = []
        self.blobs: dict[str, bytes] = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, address: None  # a client hanging up early is no error
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def add(self, kind: str, repo_id: str, commit: str, files: dict[str, bytes], branch: str | None = "main") -> None:
        repo = self.repos.setdefault((kind, repo_id), Repo(kind, repo_id, {}))
        repo.commits[commit] = files
        if branch:
            repo.branches[branch] = commit
        for data in files.values():
            self.blobs[hashlib.sha256(data).hexdigest()] = data

    def __enter__(self) -> Hub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------ the protocol

    def _find(self, kind: str, repo_id: str, revision: str):
        repo = self.repos.get((kind, repo_id))
        if repo is None:
            return None, ("RepoNotFound", "Repository not found")
        commit = repo.branches.get(revision, revision)
        if commit not in repo.commits:
            return None, ("RevisionNotFound", f"Invalid rev id: {revision}")
        return (repo, commit), None

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                self._serve(body=False)

            def do_GET(self) -> None:
                self._serve(body=True)

            def _error(self, status: int, code: str, message: str) -> None:
                payload = json.dumps({"error": message}).encode()
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", message)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _serve(self, body: bool) -> None:
                path = urlsplit(self.path).path
                hub.requests.append((self.command, unquote(path), self.headers.get("Range")))
                if any(fragment in path for fragment in hub.silent):
                    hub.closing.wait()  # the connection stays open; no byte is ever sent
                    return
                parts = path.strip("/").split("/")
                if parts[:1] == ["api"] and len(parts) >= 6 and parts[4] == "revision":
                    return self._info(parts[1], f"{parts[2]}/{parts[3]}", unquote("/".join(parts[5:])), body)
                if parts[:1] == ["cdn"]:
                    return self._bytes(hub.blobs[parts[1]], parts[1], None, body)
                kind = "datasets" if parts[0] == "datasets" else "models"
                if kind == "datasets":
                    parts = parts[1:]
                if len(parts) >= 5 and parts[2] == "resolve":
                    return self._resolve(
                        kind, f"{parts[0]}/{parts[1]}", unquote(parts[3]), unquote("/".join(parts[4:])), body
                    )
                self._error(404, "NotFound", f"no route {path}")

            def _info(self, kind: str, repo_id: str, revision: str, body: bool) -> None:
                found, error = hub._find(kind, repo_id, revision)
                if error:
                    return self._error(404, *error)
                repo, commit = found
                payload = json.dumps(
                    {
                        "_id": commit[:24],
                        "id": repo_id,
                        "sha": commit,
                        "private": False,
                        "siblings": [{"rfilename": f} for f in repo.commits[commit]],
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if body:
                    self.wfile.write(payload)

            def _resolve(self, kind: str, repo_id: str, revision: str, filename: str, body: bool) -> None:
                found, error = hub._find(kind, repo_id, revision)
                if error:
                    return self._error(404, *error)
                repo, commit = found
                files = repo.commits[commit]
                if filename not in files:
                    return self._error(404, "EntryNotFound", "Entry not found")
                data = files[filename]
                sha = hashlib.sha256(data).hexdigest()
                if len(data) >= hub.lfs_from:  # an LFS file: the hub redirects to its CDN
                    self.send_response(302)
                    self.send_header("Location", f"/cdn/{sha}?filename={filename}")
                    self.send_header("X-Repo-Commit", commit)
                    self.send_header("X-Linked-Etag", f'"{sha}"')
                    self.send_header("X-Linked-Size", str(len(data)))
                    self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self._bytes(data, hashlib.sha1(data).hexdigest(), commit, body, filename)

            def _bytes(
                self, data: bytes, etag: str, commit: str | None, body: bool, filename: str | None = None
            ) -> None:
                filename = filename or urlsplit(self.path).query.removeprefix("filename=")
                start, status = 0, 200
                wanted = self.headers.get("Range")
                if wanted:
                    start = int(wanted.removeprefix("bytes=").split("-")[0])
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    status = 206
                chunk = hub.damaged.get(filename, data)[start:]
                self.send_response(status)
                if commit:
                    self.send_header("X-Repo-Commit", commit)
                self.send_header("ETag", f'"{etag}"')
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(len(chunk)))
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                if not body:
                    return
                if filename in hub.trickle:
                    return self._trickle(chunk, *hub.trickle[filename])
                cut = hub.cut.pop(filename, None)
                if isinstance(cut, list):
                    if len(cut) > 1:
                        hub.cut[filename] = cut[1:]
                    cut = cut[0]
                if cut is not None and cut < len(chunk):
                    self.wfile.write(chunk[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.wfile.write(chunk)

            def _trickle(self, chunk: bytes, first: int, seconds: float) -> None:
                self.wfile.write(chunk[:first])
                self.wfile.flush()
                for byte in range(first, len(chunk)):
                    if hub.closing.wait(seconds):
                        return
                    self.wfile.write(chunk[byte : byte + 1])
                    self.wfile.flush()

        return Handler
