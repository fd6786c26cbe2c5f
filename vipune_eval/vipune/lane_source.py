"""vipune-lane's source identity: which build of ``lane/`` (the Rust vipune-lane) this checkout needs.

No imports beyond the standard library: ``.ci/vipune/build.sh`` runs this file with the system
Python, before anything is installed, to name the lane it builds (``vipune-lane-<id>`` beside the
vipune binary); the workflow asks the same function which lane to look for there.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

LANE = Path(__file__).resolve().parents[2] / "lane"  # the crate, beside the package


def files(lane: Path = LANE) -> list[Path]:
    """What the lane is built from: its manifest and its Rust sources."""
    return sorted([lane / "Cargo.toml", *(lane / "src").rglob("*.rs")])


def source_sha256(lane: Path = LANE) -> str:
    """sha256 over each source file's path (relative to the crate) and bytes."""
    digest = hashlib.sha256()
    for path in files(lane):
        digest.update(path.relative_to(lane).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def lane_name(sha256: str) -> str:
    """The file name of the lane built from sources with this sha256."""
    return f"vipune-lane-{sha256[:12]}"


if __name__ == "__main__":  # build.sh: the sha256 and the file name, on one line
    sha = source_sha256(Path(sys.argv[1]) if len(sys.argv) > 1 else LANE)
    print(sha, lane_name(sha))
