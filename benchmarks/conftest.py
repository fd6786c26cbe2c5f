"""Fixtures of the benchmark suite: generated data, models, the fake vipune, a work folder.

Run with ``pytest benchmarks/`` (or ``python -m benchmarks.results`` to rewrite RESULTS.md).
The test suite's ``pytest`` never collects these (testpaths = ["tests"]; files are bench_*.py).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from benchmarks.common import BGE_REPO_ID, BGE_REVISION, DEFAULT_MODEL, MODEL_ENV, OUT, Model, cli, run_child

os.environ["HF_HUB_OFFLINE"] = "1"


@pytest.fixture(scope="session")
def work() -> Path:
    """This session's work folder, ``benchmarks/out/work`` (emptied first)."""
    path = OUT / "work"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


@pytest.fixture(scope="session")
def tiny_model() -> Model:
    """The tiny generated test model (tests/support/tinymodel.py): fast, 384-d, not a BERT."""
    from support.tinymodel import build_tiny_model

    folder = OUT / "tiny-model"
    if not (folder / "model.onnx").exists():
        build_tiny_model(folder)
    return Model(folder, "tiny test model")


@pytest.fixture(scope="session")
def embed_model(tiny_model: Model) -> Model:
    """The model embed benchmarks time: $VIPUNE_BENCH_MODEL, else all-MiniLM-L6-v2-onnx beside
    the checkout (../shared/models/) when present, else the tiny test model."""
    chosen = os.environ.get(MODEL_ENV)
    folder = Path(chosen) if chosen else DEFAULT_MODEL
    if (folder / "model.onnx").exists():
        return Model(folder.resolve(), folder.name)
    if chosen:
        raise pytest.UsageError(f"{MODEL_ENV}={chosen}: no model.onnx there")
    return tiny_model


@pytest.fixture(scope="session")
def fake_vipune(work: Path) -> Path:
    """A ``vipune`` executable: a shell wrapper around tests/support/fake_vipune.py (Python, so its own
    times are the fake's; what the harness adds around it is what carries over)."""
    from support.fakes import fake_build

    return fake_build(work, lane=False)[0]


@pytest.fixture(scope="session")
def vipune_home(work: Path, tiny_model: Model) -> Path:
    """The HF_HOME the fake vipune embeds questions from (the tiny model as bge-small)."""
    home = work / "vipune-home"
    run_child(
        cli(
            "vipune-home",
            model_dir=tiny_model.dir,
            file=tiny_model.file,
            repo_id=BGE_REPO_ID,
            revision=BGE_REVISION,
            out=home,
        ),
        work / "logs" / "vipune-home.log",
    )
    return home


@pytest.fixture(scope="session")
def vipune_fingerprint(work: Path, fake_vipune: Path) -> Path:
    """The binary fingerprint file ``search-vipune`` checks the binary against."""
    from vipune_eval.vipune.binary import binary_fingerprint

    path = work / "vipune-fingerprint.json"
    path.write_text(json.dumps(binary_fingerprint(fake_vipune, 60)))
    return path


# Unique session texts for embed benchmarks: sessions of 12 turns x 150 words (~2 500 tokens,
# cut to 512 by the model, as most LongMemEval sessions are).
SESSION_TEXTS = {"small": 24, "M": 400}
SESSION_DATA = dict(
    instances=30,
    abstention=0,
    sessions_per_haystack=20,
    filler_pool=600,
    turns_per_session=12,
    words_per_turn=150,
    seed=7,
)


@pytest.fixture(scope="session")
def session_texts(work: Path) -> Path:
    """A Parquet file (text_id, text) of unique generated session texts, sampled with seed 0
    (as many as VIPUNE_BENCH_SIZE says), from ``filter-rows`` of a generated file."""
    from benchmarks.common import filter_view, generate, sample_texts, sized

    dest = work / "session-texts"
    filter_view(generate(SESSION_DATA), dest)
    return sample_texts(dest / "texts.parquet", sized(SESSION_TEXTS), dest / "sample.parquet")


# Search data: M-like haystack counts at "M" (470 pairs x 500 sessions), short sessions
# (6 turns x 30 words) so the tiny model embeds them quickly.
SEARCH_DATA = {
    "small": dict(
        instances=60,
        abstention=0,
        sessions_per_haystack=100,
        filler_pool=3000,
        turns_per_session=6,
        words_per_turn=30,
        seed=2,
    ),
    "M": dict(
        instances=500,
        abstention=30,
        sessions_per_haystack=500,
        filler_pool=20000,
        turns_per_session=6,
        words_per_turn=30,
        seed=2,
    ),
}


@pytest.fixture(scope="session")
def search_view(work: Path, tiny_model: Model) -> dict[str, Path]:
    """A filtered session view of generated data, embedded with the tiny model: what both search
    lanes read (``rows``, ``texts``, ``embeddings``, plus ``pairs`` and ``qrels``)."""
    from benchmarks.common import embed_cmd, filter_view, generate, sized

    dest = work / "search-view"
    filter_view(generate(sized(SEARCH_DATA)), dest)
    emb = dest / "embeddings.parquet"
    run_child(embed_cmd(tiny_model, dest / "texts.parquet", emb), dest / "embed.log")
    return {
        "rows": dest / "rows.parquet",
        "texts": dest / "texts.parquet",
        "embeddings": emb,
        "pairs": dest / "pairs.parquet",
        "qrels": dest / "qrels.txt",
    }


@pytest.fixture(scope="module")
def real_vipune() -> Path:
    """The real vipune at the pinned release, as .ci/vipune/build.sh left it; the benchmark is
    skipped, saying why, where it is not built."""
    from support.real_vipune import find

    binary, why = find()
    if binary is None:
        pytest.skip(why)
    return binary


@pytest.fixture(scope="module")
def real_build(real_vipune: Path) -> tuple[Path, Path]:
    """(the real vipune at the pinned release, the vipune-lane built beside it); skipped, saying
    why, where the vipune-lane is missing."""
    from vipune_eval.vipune.release import RELEASE
    from vipune_eval.vipune.vipune_lane import LaneError, find_lane

    try:
        return real_vipune, find_lane(real_vipune, RELEASE)
    except LaneError as exc:
        pytest.skip(exc.message)
