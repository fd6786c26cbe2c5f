"""stages/search/kept_stores.py: each persona's database as the lib lane seeded it, kept under a
key of what could have written it and reused by later searches (copied, never opened), the
folder held to its size by least recent use; a shard whose stores are kept is read without its
texts. The jobs run on the fake lane and on the real one (issue 54 item 1)."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import logging
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from support.fakes import fake_build
from support.search import write_shard
from vipune_eval.core.persona import Persona
from vipune_eval.core.trec import read_run
from vipune_eval.stages.search import kept_stores, vipune_lib
from vipune_eval.stages.search.kept_stores import Keeping, KeptStores, evict, size
from vipune_eval.stages.search.vipune_lib import run_vipune_lib
from vipune_eval.vipune.settings import VipuneSettings
from vipune_eval.vipune.vipune_lane import lane_fingerprint


def persona(seed: int, rows: int) -> Persona:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(rows, 384)).astype(np.float32)
    qid = f"q{seed}"
    words = "red car park walk dog rain luna named".split()
    return Persona(
        qid,
        "where did I park the red car?",
        [f"{qid}::s{i}" for i in range(rows)],
        [f"s{i}" for i in range(rows)],
        ["2023-01-01T00:00:00Z"] * rows,
        ["user: " + " ".join(rng.choice(words, 6)) for _ in range(rows)],
        vectors,
        vectors[rng.integers(rows)] + rng.normal(scale=0.3, size=384).astype(np.float32),
    )


PERSONAS = [persona(0, 30), persona(1, 80), persona(2, 5)]


def fingerprint_of(binary: Path, lane: Path, folder: Path) -> Path:
    built = {"id": "x", "version": "0.20.2", "sha256": hashlib.sha256(binary.read_bytes()).hexdigest()}
    path = folder / f"{lane.name}.json"
    path.write_text(json.dumps(lane_fingerprint(lane, built, 30)))
    return path


def search(shard, lane: Path, fingerprint: Path, folder: Path, stores: Path, gb: float = 1.0) -> tuple[dict, dict]:
    """One lib-lane job over ``shard`` with its stores kept in ``stores``: its runs and status."""
    runs = {name: folder / f"{name}.run" for name in ("hybrid", "semantic")}
    run_vipune_lib(
        shard,
        VipuneSettings("", Path(), None, folder / "tmp", 60),
        lane,
        fingerprint,
        on_error="stop",
        out=runs["hybrid"],
        semantic_out=runs["semantic"],
        status_out=folder / "status.json",
        arms_out=folder / "arms.parquet",
        keeping=Keeping(stores, gb),
    )
    return (
        {name: dict(read_run([path])) for name, path in runs.items()},
        json.loads((folder / "status.json").read_text()),
    )


@pytest.fixture
def no_ram(tmp_path, monkeypatch):
    monkeypatch.setattr(vipune_lib, "RAM", tmp_path / "no-shm")


def hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.db"))}


def test_a_second_search_copies_every_kept_store_and_ranks_as_seeding_does(any_lane, tmp_path, no_ram):
    binary, lane = any_lane
    shard = write_shard(tmp_path / "view", PERSONAS)
    fingerprint = fingerprint_of(binary, lane, tmp_path)
    stores = tmp_path / "stores"
    unkept, unkept_status = search(shard, lane, fingerprint, tmp_path / "none", stores, gb=0)
    assert not stores.exists()  # 0 GB: none kept
    first, first_status = search(shard, lane, fingerprint, tmp_path / "first", stores)
    assert {"open", "insert", "keep"} <= set(first_status["lane_seconds"]) and "copy" not in first_status[
        "lane_seconds"
    ]
    kept = hashes(stores)
    assert len(kept) == len(PERSONAS) and size(stores) == sum(p.stat().st_size for p in stores.glob("*.db"))
    for path in stores.glob("*.db"):  # each a whole database: one persona's rows, as seeded
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            ((project, rows),) = db.execute("SELECT project_id, count(*) FROM memories GROUP BY project_id")
        assert rows == len(next(p for p in PERSONAS if p.question_id == project).row_ids)
    again, again_status = search(shard, lane, fingerprint, tmp_path / "again", stores)
    assert "copy" in again_status["lane_seconds"] and not {"open", "insert", "keep"} & set(again_status["lane_seconds"])
    assert first == again == unkept and list(again["hybrid"]) == [p.question_id for p in PERSONAS]
    assert first_status["searched"] == again_status["searched"] == unkept_status["searched"]
    assert hashes(stores) == kept  # the searches opened copies: not a byte of a kept store changed
    assert not (tmp_path / "again" / "tmp").exists()  # the job's staging folder (its pins) removed


def test_an_edit_of_the_search_reuses_the_stores_and_an_edit_of_the_seeding_seeds_anew(tmp_path, no_ram):
    """The fake lane's stand-ins: FAKE_VIPUNE_FAULT=bm25-or changes its search only, so its stores
    are reused and its rankings follow the edit; FAKE_LANE_SEEDING stands for an edit of what
    seeds (vipune's insert path): its own stores."""
    shard = write_shard(tmp_path / "view", PERSONAS)
    stores = tmp_path / "stores"

    def job(name: str, preamble: str = "") -> tuple[dict, dict]:
        binary, lane = fake_build(tmp_path / f"build-{name}", preamble=preamble)
        return search(shard, lane, fingerprint_of(binary, lane, tmp_path / f"build-{name}"), tmp_path / name, stores)

    release, _ = job("release")
    searched, status = job("search-edit", "FAKE_VIPUNE_FAULT=bm25-or export FAKE_VIPUNE_FAULT\n")
    assert "copy" in status["lane_seconds"] and len(hashes(stores)) == len(PERSONAS)
    assert searched["hybrid"] != release["hybrid"]  # the edit ran, on the kept stores
    seeded, status = job("seeding-edit", "FAKE_LANE_SEEDING=another-insert export FAKE_LANE_SEEDING\n")
    assert "insert" in status["lane_seconds"] and "copy" not in status["lane_seconds"]
    assert seeded == release and len(hashes(stores)) == 2 * len(PERSONAS)  # its own, beside the first


def test_a_shard_whose_stores_are_kept_is_read_without_its_texts(tmp_path, no_ram):
    binary, lane = fake_build(tmp_path / "build")
    fingerprint = fingerprint_of(binary, lane, tmp_path)
    shard = write_shard(tmp_path / "view", PERSONAS)
    stores = tmp_path / "stores"
    search(shard, lane, fingerprint, tmp_path / "first", stores)
    built = json.loads(fingerprint.read_text())["built"]

    def made(folder: str) -> list[Persona]:
        keeper = KeptStores.for_lane(built, Keeping(stores, 1), tmp_path / folder)
        made = list(keeper.personas(shard))
        keeper.close()
        return made

    light = made("light")
    assert [p.texts for p in light] == [[]] * len(PERSONAS) and [len(p.vectors) for p in light] == [0] * 3
    assert [p.digests() for p in light] == [p.digests() for p in PERSONAS]  # as the rows gave them
    assert [p.row_ids for p in light] == [p.row_ids for p in PERSONAS]
    assert all(np.array_equal(a.query_vector, b.query_vector) for a, b in zip(light, PERSONAS))
    keys = KeptStores.for_lane(built, Keeping(stores, 1), tmp_path / "keys")
    (stores / f"{keys.key(PERSONAS[1])}.db").unlink()  # removed as least recently used
    partly = made("partly")
    assert [p.question_id for p in partly] == [p.question_id for p in PERSONAS]  # the shard's order
    assert [len(p.texts) for p in partly] == [0, len(PERSONAS[1].texts), 0]  # the one whose store is gone, in full
    other = write_shard(tmp_path / "view", [PERSONAS[0], persona(7, 12), PERSONAS[2]])  # other bytes
    assert [
        bool(p.texts) for p in KeptStores.for_lane(built, Keeping(stores, 1), tmp_path / "other").personas(other)
    ] == [True] * 3


def test_the_least_recently_used_stores_are_removed_beyond_the_limit(tmp_path):
    stores = tmp_path / "stores"
    stores.mkdir()
    for i, age in enumerate([50, 10, 30, 20]):
        path = stores / f"{i}.db"
        path.write_bytes(b"x" * 1000)
        os.utime(path, (1_000_000 - age, 1_000_000 - age))
    (stores / "digests").mkdir()
    assert evict(stores, 4000) == (0, 0)
    assert evict(stores, 2500) == (2, 2000) and sorted(p.name for p in stores.glob("*.db")) == ["1.db", "3.db"]
    assert size(stores) == 2000 and evict(stores, 0) == (2, 2000) and size(stores) == 0
    assert (stores / "digests").is_dir()


def test_a_reused_store_is_pinned_and_marked_used_and_a_kept_one_appears_only_whole(tmp_path, caplog):
    built = {
        "sources": {"seeding": {"sha256": "s" * 64, "search_only": [], "changed": []}},
        "lane_source": "l",
        "profile": "fast",
    }
    stores = tmp_path / "stores"
    keeper = KeptStores.for_lane(built, Keeping(stores, 1), tmp_path / "job-1")
    plan = keeper.plan(PERSONAS[0])
    assert list(plan) == ["keep"] and not list(stores.glob("*.db"))
    Path(plan["keep"]).write_bytes(b"a seeded database")
    keeper.answered(PERSONAS[0], {"question_id": "q0"})
    store = stores / Path(plan["keep"]).name
    assert store.read_bytes() == b"a seeded database" and not Path(plan["keep"]).exists()
    with caplog.at_level(logging.WARNING, logger="vipune_eval"):
        keeper.answered(PERSONAS[1], {"question_id": "q1"})  # never planned: nothing to keep
        failed = keeper.plan(PERSONAS[2])
        keeper.answered(PERSONAS[2], {"question_id": "q2", "keep_error": "disk full"})
    assert not (stores / Path(failed["keep"]).name).exists() and "q2's database is not kept: disk full" in caplog.text
    os.utime(store, (1, 1))
    other = KeptStores.for_lane(built, Keeping(stores, 1), tmp_path / "job-2")
    pinned = Path(other.plan(PERSONAS[0])["seeded"])
    assert store.stat().st_mtime > 1 and other.reused == 1
    store.unlink()  # removed by another job as least recently used: the pin still reads
    assert pinned.read_bytes() == b"a seeded database"
    other.close()
    assert not (tmp_path / "job-2").exists()


def test_each_thing_that_seeds_makes_its_own_keys_and_a_lane_that_names_none_keeps_none(tmp_path, caplog):
    def keys(seeding: str = "s", lane_source: str = "l", profile: str | None = "fast") -> str:
        built = {
            "sources": {"seeding": {"sha256": seeding, "search_only": [], "changed": []}},
            "lane_source": lane_source,
            "profile": profile,
        }
        return KeptStores.for_lane(built, Keeping(tmp_path / "stores", 1), tmp_path / "job").key(PERSONAS[0])

    assert keys() == keys() and len({keys(), keys("t"), keys(lane_source="m"), keys(profile=None)}) == 4
    built = {"sources": {"seeding": {"sha256": "s"}}, "lane_source": "l", "profile": None}
    assert KeptStores.for_lane(built, Keeping(tmp_path / "stores", 0), tmp_path / "job") is None
    with caplog.at_level(logging.INFO, logger="vipune_eval"):
        assert KeptStores.for_lane({"sources": None}, Keeping(tmp_path / "stores", 1), tmp_path / "job") is None
    assert "records no digest of what seeds its databases" in caplog.text
    keeper = KeptStores.for_lane(built, Keeping(tmp_path / "stores", 1), tmp_path / "job")
    other_text = dataclasses.replace(PERSONAS[0], texts=["other"] + PERSONAS[0].texts[1:])
    other_vector = dataclasses.replace(PERSONAS[0], vectors=PERSONAS[0].vectors[::-1].copy())
    assert len({keeper.key(PERSONAS[0]), keeper.key(other_text), keeper.key(other_vector)}) == 3


@pytest.mark.parametrize("where", ["link", "replace"])
def test_stores_on_another_file_system_are_copied(tmp_path, monkeypatch, where):
    def cross(*args, **kwargs):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    built = {"sources": {"seeding": {"sha256": "s"}}, "lane_source": "l", "profile": None}
    stores = tmp_path / "stores"
    keeper = KeptStores.for_lane(built, Keeping(stores, 1), tmp_path / "job")
    plan = keeper.plan(PERSONAS[0])
    Path(plan["keep"]).write_bytes(b"seeded")
    if where == "replace":
        real = os.replace
        monkeypatch.setattr(
            kept_stores.os, "replace", lambda a, b: cross() if Path(a).parent != Path(b).parent else real(a, b)
        )
    keeper.answered(PERSONAS[0], {"question_id": "q0"})
    assert (stores / Path(plan["keep"]).name).read_bytes() == b"seeded"
    if where == "link":
        monkeypatch.setattr(kept_stores.os, "link", cross)
    other = KeptStores.for_lane(built, Keeping(stores, 1), tmp_path / "job-2")
    assert Path(other.plan(PERSONAS[0])["seeded"]).read_bytes() == b"seeded"
