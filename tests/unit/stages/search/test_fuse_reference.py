"""fuse-reference: a family setting's runs, one per arms file (search shard), fused from the
shared arms without searching again; what it cannot fuse it refuses."""

import numpy as np
import pytest

from vipune_eval.core.persona import Persona
from vipune_eval.core.ranking_settings import RankingSettings
from vipune_eval.errors import EvalError
from vipune_eval.registry import retrievers as registry
from vipune_eval.stages.search import rankers
from vipune_eval.stages.search.arms import persona_arms, write_arms
from vipune_eval.stages.search.fuse_reference import run_fuse_reference

WORDS = "cat dog luna walk park rain sun tea".split()


def persona(seed: int, rows: int = 30) -> Persona:
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(2, 6))) for _ in range(rows)]
    return Persona(
        question_id=f"q{seed}",
        question=" ".join(rng.choice(WORDS, size=2)),
        row_ids=[f"q{seed}::r{i}" for i in range(rows)],
        session_ids=[f"s{i % 7}" for i in range(rows)],
        created_at=["2023-01-01T00:00:00Z"] * rows,
        texts=texts,
        vectors=rng.normal(size=(rows, 8)).astype(np.float32),
        query_vector=rng.normal(size=8).astype(np.float32),
    )


def test_each_arms_file_gives_its_own_run_of_the_setting(tmp_path):
    arms = [persona_arms(persona(s)) for s in range(3)]
    write_arms(tmp_path / "a0.parquet", arms[:1])
    write_arms(tmp_path / "a1.parquet", arms[1:])
    spec = registry.spec({"name": "k60", "use": "hybrid", "k": 60})
    outs = [tmp_path / "r0.run", tmp_path / "r1.run"]
    run_fuse_reference(
        [tmp_path / "a0.parquet", tmp_path / "a1.parquet"], spec.canonical(), RankingSettings(10, 10), outs
    )
    runs = [[line.split() for line in out.read_text().splitlines()] for out in outs]
    assert {line[0] for line in runs[0]} == {"q0"} and {line[0] for line in runs[1]} == {"q1", "q2"}
    assert all(line[5] == "k60" for run in runs for line in run)
    for a in arms:
        docs = [line[2] for run in runs for line in run if line[0] == a.question_id]
        assert docs == a.documents(rankers.rank(a, spec, 10)[0], RankingSettings(10, 10))


def test_the_depth_cuts_the_run_and_the_limit_the_fusion(tmp_path):
    write_arms(tmp_path / "a.parquet", [persona_arms(persona(0))])
    run_fuse_reference([tmp_path / "a.parquet"], "dense", RankingSettings(10, 2), [tmp_path / "depth.run"])
    assert len((tmp_path / "depth.run").read_text().splitlines()) == 2
    run_fuse_reference([tmp_path / "a.parquet"], "dense", RankingSettings(1, 10), [tmp_path / "limit.run"])
    assert len((tmp_path / "limit.run").read_text().splitlines()) == 1  # one row: one session


def test_it_refuses_what_it_cannot_fuse(tmp_path):
    write_arms(tmp_path / "arms.parquet", [persona_arms(persona(0))])
    with pytest.raises(EvalError, match="1 arms files for 2 outputs"):
        run_fuse_reference(
            [tmp_path / "arms.parquet"], "hybrid", RankingSettings(10, 10), [tmp_path / "a.run", tmp_path / "b.run"]
        )
    with pytest.raises(EvalError, match="not a family setting fused from the arms"):
        run_fuse_reference([tmp_path / "arms.parquet"], "bm25-lme", RankingSettings(10, 10), [tmp_path / "out.run"])
