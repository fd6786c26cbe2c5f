""".ci/vipune/build.sh without cargo: what it refuses before creating anything, and how it copies a
checkout into its build (.ci/vipune/sync_tree.py): by content, never trusting a file's
modification time, as cargo does (issue 51 item 2; ../shared/PITFALLS.md "Builds and parsing")."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import real_vipune

SYNC = real_vipune.BUILD.parent / "sync_tree.py"
CRATES_IO_TIME = 1153704088  # 2006-07-24, the time of every file crates.io ships


@pytest.mark.parametrize(
    "args, said",
    [
        (["--checkout", "{tree}", "--fsat"], "unknown option --fsat"),
        (["--checkout", "{tree}", "--fast", "1.31"], "1.31: not an ONNX Runtime version"),
        (["--checkout", "{tree}", "1.31.1", "extra"], "takes one more argument at most"),
        (["--fast"], "--fast is an option of --checkout DIR"),
        (["--lane-only"], "--lane-only is an option of --checkout DIR"),
        (["--source", "0.20.2", "--lane-only"], "--source takes a release and nothing else"),
        (["--cached", "--checkout", "{tree}"], "--cached looks for a release's build"),
        (["--checkout", "{tree}/missing"], "no such folder"),
        (["0.20.2", "1.31.1", "more"], "too many arguments"),
        (["--source"], "--source needs a release"),
    ],
)
def test_an_unknown_or_misplaced_argument_is_refused_before_anything_is_created(tmp_path, args, said):
    """Issue 51: `--checkout DIR --fsat` reached pip and left `…-ort--fsat` folders behind."""
    tree = tmp_path / "vipune"
    tree.mkdir()
    (tree / "Cargo.lock").write_text("")
    cache = tmp_path / "cache"
    proc = subprocess.run(
        ["bash", str(real_vipune.BUILD), *[a.format(tree=tree) for a in args]],
        capture_output=True,
        text=True,
        env={**os.environ, "VIPUNE_EVAL_CACHE": str(cache)},
        timeout=60,
    )
    assert proc.returncode == 2 and said in proc.stderr and "usage: .ci/vipune/build.sh" in proc.stderr
    assert proc.stdout == "" and not cache.exists()


def sync(tree: Path, copy: Path, *exclude: str) -> str:
    args = [a for name in exclude for a in ("--exclude", name)]
    return subprocess.run(
        [sys.executable, str(SYNC), str(tree), str(copy), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_the_build_copy_follows_bytes_never_the_trees_modification_times(tmp_path):
    """A file whose bytes differ from the build's copy is written afresh, newer than anything
    built before, even where the tree's file is older (crates.io's 2006, a file restored from a
    pristine copy); an unchanged file keeps the copy's time, so cargo recompiles only what changed."""
    tree, copy = tmp_path / "vipune", tmp_path / "build" / "src"
    (tree / "src" / "memory").mkdir(parents=True)
    (tree / "src" / "rrf.rs").write_text("Self { k: 2.0 }\n")
    (tree / "src" / "memory" / "search.rs").write_text("fn search() {}\n")
    (tree / "Cargo.lock").write_text("lock\n")
    (tree / "target").mkdir()
    (tree / "target" / "built").write_text("never copied\n")
    (tree / "run.sh").write_text("#!/bin/sh\n")
    (tree / "run.sh").chmod(0o755)
    for path in tree.rglob("*"):
        os.utime(path, (CRATES_IO_TIME, CRATES_IO_TIME))
    assert sync(tree, copy, "target", ".git").startswith("4 written")
    assert not (copy / "target").exists() and os.access(copy / "run.sh", os.X_OK)
    built = time.time()  # a build compiled the copy now: its artifacts are this new
    time.sleep(0.05)
    (tree / "src" / "rrf.rs").write_text("Self { k: 25.0 }\n")  # other bytes, an older time
    os.utime(tree / "src" / "rrf.rs", (CRATES_IO_TIME, CRATES_IO_TIME))
    kept = (copy / "src" / "memory" / "search.rs").stat().st_mtime_ns
    assert sync(tree, copy, "target") == "1 written (src/rrf.rs)"
    assert (copy / "src" / "rrf.rs").read_text() == "Self { k: 25.0 }\n"
    assert (copy / "src" / "rrf.rs").stat().st_mtime > built  # cargo sees it changed
    assert (copy / "src" / "memory" / "search.rs").stat().st_mtime_ns == kept  # and nothing else
    assert sync(tree, copy, "target") == "unchanged"
    (tree / "src" / "memory" / "search.rs").unlink()
    (copy / "Cargo.lock").write_text("relocked\n")  # a lock the build keeps: excluded
    assert sync(tree, copy, "target", "Cargo.lock") == "1 removed (src/memory/search.rs)"
    assert (copy / "Cargo.lock").read_text() == "relocked\n"
    assert sync(tree, copy, "target") == "1 written (Cargo.lock)"
