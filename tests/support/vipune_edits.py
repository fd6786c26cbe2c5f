#!/usr/bin/env python3
"""One-line edits of vipune 0.20.2's source, as a maintainer would make them (issue 52 item 5):
each an exact text replaced in one file, refused when the text is not there (another release).

- ``dispatch``: "short queries skip BM25", in the command's dispatch (``execute``,
  src/commands/mod.rs): a query of three words or fewer is searched without the BM25 arm. The vipune-lane
  stands in for ``execute``: a stale copy.
- ``query-prefix``: bge's retrieval instruction put before a search's query (``prefix_input``,
  src/embedding/engine.rs): the query's embedding changes; the vipune-lane answers with the cached vector.
- ``min-cosine``: rows whose cosine is under 0.2 left out of the vector scan (``Database::search``,
  src/sqlite/search.rs, vipune's library, which the vipune-lane links): a loss on the tests' tiny model,
  whose gold sessions score 0.10 to 0.22.
- ``comment``: a comment in src/rrf.rs (compiled into the vipune-lane): nothing changes.

Standard library only: .ci/run runs it with the system Python to set up the fixtures it builds
(``python3 tests/support/vipune_edits.py SOURCE DEST EDIT...``: a copy of SOURCE, modification
times kept, with the edits applied).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

EDITS: dict[str, tuple[str, str, str]] = {  # name → (file, the text, its replacement)
    "dispatch": (
        "src/commands/mod.rs",
        "                hybrid: *hybrid,\n",
        "                hybrid: *hybrid && query.split_whitespace().count() > 3, // short queries skip BM25\n",
    ),
    "query-prefix": (
        "src/embedding/engine.rs",
        "        let prefix = role.prefix(self.profile);\n",
        "        let prefix = match role {\n"
        '            EmbeddingRole::Query => "Represent this sentence for searching relevant passages: ",\n'
        "            EmbeddingRole::Passage => role.prefix(self.profile),\n"
        "        };\n",
    ),
    "min-cosine": (
        "src/sqlite/search.rs",
        "                &stored_embedding,\n            )?);\n",
        "                &stored_embedding,\n            )?);\n"
        "            if similarity < Some(0.2) {\n                continue; // a minimum cosine\n            }\n",
    ),
    "comment": (
        "src/rrf.rs",
        "//! Reciprocal Rank Fusion (RRF) algorithm for hybrid search\n",
        "//! Reciprocal Rank Fusion (RRF) algorithm for hybrid search\n// (a comment: nothing changes)\n",
    ),
}


def apply(source: Path, names: list[str]) -> None:
    """Apply the named edits to the vipune source tree ``source``, in place."""
    for name in names:
        file, old, new = EDITS[name]
        path = source / file
        text = path.read_text(encoding="utf-8")
        if text.count(old) != 1:
            raise SystemExit(
                f"vipune_edits.py: {path} holds the text the {name!r} edit replaces "
                f"{text.count(old)} times, not once (another vipune release?)"
            )
        path.write_text(text.replace(old, new), encoding="utf-8")


def edited_copy(source: Path, dest: Path, names: list[str]) -> Path:
    """A copy of ``source`` at ``dest`` (modification times kept, as build.sh's own copy keeps
    them) with the named edits applied; ``dest`` made afresh."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(source, dest, symlinks=True, ignore=shutil.ignore_patterns("target", ".git"))
    apply(dest, names)
    return dest


if __name__ == "__main__":
    if len(sys.argv) < 4 or any(n not in EDITS for n in sys.argv[3:]):
        raise SystemExit(f"usage: vipune_edits.py SOURCE DEST EDIT... (edits: {', '.join(EDITS)})")
    edited_copy(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:])
