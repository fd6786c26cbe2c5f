"""vipune-lane's source identity, and what it takes from a vipune source.

Which build of ``lane/`` (the Rust vipune-lane) this checkout needs, and what of a vipune source
it compiles and what it copies (``lane/vipune_sources.json``).

No imports beyond the standard library: ``.ci/vipune/build.sh`` runs this file with the system
Python, before anything is installed, to name the vipune-lane it builds (``vipune-lane-<id>`` beside the
vipune binary) and to record the sha256 of the vipune source the binary is built from
(``--library DIR``); the vipune-lane's build script (lane/build.rs) runs it whenever cargo compiles the
vipune-lane against a changed source, to record what it compiled: the sha256 of each file the vipune-lane
compiles, of each item the vipune-lane copies and of that whole source (``--sources DIR``). The workflow
asks the same functions which lane to look for, and refuses a lane whose source is not its
binary's (vipune/vipune_lane.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

LANE = Path(__file__).resolve().parents[2] / "lane"  # the crate, beside the package
SOURCES = "vipune_sources.json"  # in LANE: the files compiled from vipune's source, the items copied


def files(lane: Path = LANE) -> list[Path]:
    """What the vipune-lane is built from: its manifest, build script, Rust sources and source list."""
    return sorted([lane / "Cargo.toml", lane / "build.rs", lane / SOURCES, *(lane / "src").rglob("*.rs")])


def source_sha256(lane: Path = LANE) -> str:
    """sha256 over each source file's path (relative to the crate) and bytes."""
    digest = hashlib.sha256()
    for path in files(lane):
        digest.update(path.relative_to(lane).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def lane_name(sha256: str) -> str:
    """The file name of the vipune-lane built from sources with this sha256."""
    return f"vipune-lane-{sha256[:12]}"


def rust_item(text: str, item: str) -> str | None:
    """The text of the first ``item`` (e.g. ``fn get_embedding``, ``enum Commands``) in Rust source
    ``text``, from its keyword to its closing brace, or None where it has none. Strings, character
    literals and comments are skipped when braces are counted, so a brace inside them does not end
    the item."""
    found = re.search(rf"\b{re.escape(item)}\s*[<({{]", text)
    if not found:
        return None
    depth, i = 0, found.start()
    literal = re.compile(r'r(#*)"|"|\'(?:\\.|[^\\\'])\'|//|/\*')
    while i < len(text):
        char = text[i]
        if char in "{}":
            depth += 1 if char == "{" else -1
            if depth == 0:
                return text[found.start() : i + 1]
            i += 1
            continue
        m = literal.match(text, i)
        if not m:
            i += 1
        elif m.group(0) == "//":
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
        elif m.group(0) == "/*":
            end = text.find("*/", i + 2)
            i = len(text) if end < 0 else end + 2
        elif m.group(0).startswith("'"):
            i = m.end()
        elif m.group(0) == '"':
            j = i + 1
            while j < len(text) and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:  # a raw string: ends at a quote followed by as many hashes
            end = text.find('"' + m.group(1), m.end())
            i = len(text) if end < 0 else end + 1 + len(m.group(1))
    return None


def item_sha256(source: Path, file: str, item: str | None) -> str | None:
    """sha256 of one item's text in a vipune source (``item`` None: of the whole file's bytes), or
    None where the file or the item is gone."""
    path = source / file
    if item is None:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    text = rust_item(path.read_text(encoding="utf-8"), item) if path.is_file() else None
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()


def library_files(source: Path) -> list[Path]:
    """What cargo builds vipune's library and binary from: each file under src/, its Cargo.toml,
    Cargo.lock and build.rs (where it has one)."""
    found = [*(source / "src").rglob("*"), *(source / n for n in ("Cargo.toml", "Cargo.lock", "build.rs"))]
    return sorted(path for path in found if path.is_file())


def library_sha256(source: Path) -> str:
    """sha256 of a vipune source as cargo builds its library and binary (``library_files``, by path
    and bytes). The binary's build records it (build.json beside bin/), the vipune-lane records it as
    it compiles: a pair whose digests differ was not built from the same bytes."""
    digest = hashlib.sha256()
    for path in library_files(source):
        digest.update(path.relative_to(source).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


IMPL = re.compile(r"^[ \t]*(?:unsafe[ \t]+)?impl\b[^{;]*", re.MULTILINE)  # an impl block's header


def seeding(source: Path, lane: Path = LANE) -> dict:
    """What can write a persona's seeded database in the vipune-lane, as one digest (``sha256``): the
    bytes of every file of the source (``library_files``) but the files lane/vipune_sources.json
    shows to run only at search time (its "seeding", "search_only"), and of those only the
    headers of their ``impl`` blocks (a trait implemented there for a type the seeding uses, such
    as ``Drop for Database``, would run while seeding). The list holds only while the files the
    seeding runs ("seeding_files": ``Database::open``, its migrations, ``insert_with_id``) are the
    bytes it was read from: where one differs (``changed``), no file is left out, and any edit
    reseeds. A kept store is reused only under the same digest (with the vipune-lane's own sources and
    profile: vipune_eval/stages/search/kept_stores.py)."""
    spec = listed(lane)["seeding"]
    changed = [f["file"] for f in spec["seeding_files"] if item_sha256(source, f["file"], None) not in f["sha256"]]
    left_out = set() if changed else {f["file"] for f in spec["search_only"]}
    digest = hashlib.sha256()
    for path in library_files(source):
        name = path.relative_to(source).as_posix()
        if name in left_out:
            headers = [" ".join(m.group(0).split()) for m in IMPL.finditer(path.read_text(encoding="utf-8"))]
            digest.update(f"{name}\0impl\0{json.dumps(headers)}\0".encode())
        else:
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return {"sha256": digest.hexdigest(), "search_only": sorted(left_out), "changed": changed}


def listed(lane: Path = LANE) -> dict:
    """lane/vipune_sources.json: the vipune files the vipune-lane compiles, and every item (or whole file)
    on the search's and the import's path that it copies or stands in for, each pinned to the
    sha256 of the bytes it follows (one per release whose bytes it follows)."""
    return json.loads((lane / SOURCES).read_text(encoding="utf-8"))


def vipune_sources(source: Path, lane: Path = LANE) -> dict:
    """What the vipune-lane takes from the vipune source at ``source``: each compiled file with its
    sha256, each item it copies or stands in for (no ``item``: a whole file) with the sha256s it
    follows (``pinned``), the source's own (``source``; None where the item is gone) and whether
    the source's is one of them (``same``), the whole source's ``library_sha256``
    (``vipune_source_sha256``), and what can write a seeded database (``seeding``)."""
    sources = listed(lane)
    compiled = []
    for file in sources["compiled"]:
        path = source / file
        if not path.is_file():
            raise SystemExit(
                f"lane_source.py: {path} is missing: the vipune-lane compiles vipune's {file} "
                f'(lane/vipune_sources.json, "compiled") and cannot be built against {source}; '
                "where your edit moved or renamed it, list its new path there instead"
            )
        compiled.append({"file": file, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    copies = []
    for copy in sources["copies"]:
        pinned = [copy["sha256"]] if isinstance(copy["sha256"], str) else copy["sha256"]
        mine = item_sha256(source, copy["file"], copy.get("item"))
        copies.append(
            {
                "file": copy["file"],
                "item": copy.get("item"),
                "copied_to": copy["copied_to"],
                "what": copy["what"],
                "pinned": pinned,
                "source": mine,
                "same": mine in pinned,
            }
        )
    return {
        "compiled": compiled,
        "copies": copies,
        "vipune_source_sha256": library_sha256(source),
        "seeding": seeding(source, lane),
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["--sources"]:  # lane/build.rs: what the vipune-lane takes from the vipune source DIR
        print(json.dumps(vipune_sources(Path(sys.argv[2])), separators=(",", ":")))
    elif sys.argv[1:2] == ["--library"]:  # build.sh: the digest of the source DIR a binary is built from
        print(library_sha256(Path(sys.argv[2])))
    else:  # build.sh: the sha256 and the file name, on one line
        sha = source_sha256(Path(sys.argv[1]) if len(sys.argv) > 1 else LANE)
        print(sha, lane_name(sha))
