"""The fake vipune and its fake lane as .ci/vipune/build.sh lays a real build out: bin/vipune
and, beside it, the vipune-lane named after this checkout's lane/ sources."""

from __future__ import annotations

import sys
from pathlib import Path

from vipune_eval.vipune import lane_source

SUPPORT = Path(__file__).resolve().parent
FAKE_VIPUNE = SUPPORT / "fake_vipune.py"
FAKE_LANE = SUPPORT / "fake_lane.py"


def fake_build(folder: Path, lane: bool = True, preamble: str = "") -> tuple[Path, Path | None]:
    """(binary, lane): shell wrappers around tests/support/fake_vipune.py and tests/support/fake_lane.py in
    ``folder/bin`` (no lane with ``lane=False``); the binary keeps the query vectors it computes
    in ``folder/query-vectors`` (FAKE_VIPUNE_QUERY_CACHE, unless the caller sets it; named from
    the wrapper's own path, so that the same build in two folders has the same bytes); ``preamble``:
    shell lines both wrappers run first (a comment that changes their bytes, an exported
    FAKE_VIPUNE_FAULT: the vipune-lane is built from the binary's source, so it searches as its binary
    does)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    binary = bin_dir / "vipune"
    binary.write_text(
        f"#!/bin/sh\n{preamble}"
        'FAKE_VIPUNE_QUERY_CACHE="${FAKE_VIPUNE_QUERY_CACHE-${0%/*}/../query-vectors}" '
        f'exec "{sys.executable}" "{FAKE_VIPUNE}" "$@"\n'
    )
    binary.chmod(0o755)
    return binary, fake_lane(bin_dir, preamble) if lane else None


def fake_lane_only(folder: Path, preamble: str = "") -> Path:
    """A fake vipune-lane built alone (``build.sh --checkout DIR --lane-only``): no binary beside it,
    so its ``version`` names none."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    return fake_lane(bin_dir, preamble)


def fake_lane(bin_dir: Path, preamble: str = "") -> Path:
    """The fake lane beside ``bin_dir/vipune``, named as build.sh names the vipune-lane of this checkout."""
    sha = lane_source.source_sha256()
    wrapper = bin_dir / lane_source.lane_name(sha)
    wrapper.write_text(
        f'#!/bin/sh\n# the fake lane "built" from lane/ sources {sha}\n{preamble}'
        f'FAKE_LANE_DIR="$(dirname "$0")" exec "{sys.executable}" "{FAKE_LANE}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper
