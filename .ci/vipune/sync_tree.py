#!/usr/bin/env python3
"""Brings a build's copy of a source tree up to the tree's bytes, for .ci/vipune/build.sh.

cargo decides what to recompile by modification times, and a tree's times say nothing about the
bytes a build compiled before: crates.io's files all carry 2006-07-24, and `cp -p` keeps a file's
time, so a fresh copy of a release or a file restored from a pristine copy is *older* than the
artifacts of an earlier build of other bytes, which cargo then reuses. So the tree's times are
never copied: a file whose bytes differ from the copy's (or that the copy lacks) is written
afresh, its modification time now, newer than anything built before; a file whose bytes are the
copy's keeps the copy's time, so an incremental build recompiles only what changed; what the
tree no longer has is removed from the copy.

usage: sync_tree.py TREE COPY [--exclude NAME]...
    NAME: an entry at the top of TREE that is neither copied nor removed from COPY (target, .git;
    a Cargo.lock the build keeps as it relocked it). Prints what it wrote and removed.

Standard library only: build.sh runs it with the system Python.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path


def same_bytes(a: Path, b: Path, chunk: int = 1 << 20) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return False
    with a.open("rb") as one, b.open("rb") as other:
        while True:
            block = one.read(chunk)
            if block != other.read(chunk):
                return False
            if not block:
                return True


def write_afresh(source: Path, target: Path) -> None:
    """``source``'s bytes and mode at ``target``, as a new file (its modification time now)."""
    part = target.with_name(f".{target.name}.sync-part")
    shutil.copyfile(source, part)
    shutil.copymode(source, part)
    os.replace(part, target)


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def sync(tree: Path, copy: Path, exclude: set[str] = frozenset()) -> tuple[list[str], list[str]]:
    """Make ``copy`` hold ``tree``'s files (but ``exclude``, at the top): (written, removed), as
    paths relative to the copy."""
    written: list[str] = []
    removed: list[str] = []
    copy.mkdir(parents=True, exist_ok=True)
    for folder, dirs, files in os.walk(tree):
        here = Path(folder)
        relative = here.relative_to(tree)
        if relative == Path("."):
            dirs[:] = [d for d in dirs if d not in exclude]
            files = [f for f in files if f not in exclude]
        mirror = copy / relative
        wanted = set(dirs) | set(files)
        for name in sorted(set(os.listdir(mirror)) - wanted - (exclude if relative == Path(".") else set())):
            if name.endswith(".sync-part"):
                continue
            remove(mirror / name)
            removed.append(str(relative / name))
        for name in sorted(dirs):
            source, target = here / name, mirror / name
            if source.is_symlink():  # os.walk lists a link to a folder with the folders, and does not enter it
                files.append(name)
                dirs.remove(name)
            elif target.is_symlink() or (target.exists() and not target.is_dir()):
                remove(target)
                target.mkdir()
            else:
                target.mkdir(exist_ok=True)
        for name in sorted(files):
            source, target = here / name, mirror / name
            if source.is_symlink():
                link = os.readlink(source)
                if target.is_symlink() and os.readlink(target) == link:
                    continue
                if target.exists() or target.is_symlink():
                    remove(target)
                os.symlink(link, target)
            elif not stat.S_ISREG(source.stat().st_mode):
                continue  # a socket or a pipe: nothing cargo reads
            elif target.is_symlink() or not target.is_file() or not same_bytes(source, target):
                if target.is_symlink() or target.is_dir():
                    remove(target)
                write_afresh(source, target)
            elif stat.S_IMODE(source.stat().st_mode) != stat.S_IMODE(target.stat().st_mode):
                shutil.copymode(source, target)
                continue
            else:
                continue
            written.append(str(relative / name))
    return written, removed


if __name__ == "__main__":
    args = sys.argv[1:]
    excluded = {args[i + 1] for i, arg in enumerate(args) if arg == "--exclude"}
    paths = [arg for i, arg in enumerate(args) if arg != "--exclude" and (i == 0 or args[i - 1] != "--exclude")]
    if len(paths) != 2 or not Path(paths[0]).is_dir():
        sys.exit("usage: sync_tree.py TREE COPY [--exclude NAME]...")
    done, gone = sync(Path(paths[0]), Path(paths[1]), excluded)
    named = [
        f"{len(files)} {what} ({', '.join(files[:5])}{', …' if len(files) > 5 else ''})"
        for files, what in ((done, "written"), (gone, "removed"))
        if files
    ]
    print(", ".join(named) or "unchanged")
