"""Retriever families (issue 21): presets are family settings with unchanged rankings, typed
parameters change the fusion as documented, and the registry refuses what it does not know."""

import json
import os

import numpy as np
import pytest

from support.search import rrf, search_persona
from vipune_eval.core.persona import Persona
from vipune_eval.core.ranking_settings import RankingSettings
from vipune_eval.errors import EvalError
from vipune_eval.registry import retrievers as registry
from vipune_eval.stages.search import rankers
from vipune_eval.stages.search.arms import (
    Bm25Index,
    dense,
    fts_and_query,
    fts_or_query,
    persona_arms,
    read_arms,
    write_arms,
)
from vipune_eval.vipune.contract import candidate_pool

WORDS = "cat dog luna walk park rain sun tea cake river book song".split()


def random_persona(seed=0, rows=40, repeats=8):
    """Texts drawn from a small vocabulary with exact repeats (bm25 ties), vectors with exact
    duplicates (dense ties) and row ids whose order differs from row order (fused ties)."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(3, 9))) for _ in range(rows - repeats)]
    texts += [texts[i] for i in rng.integers(0, len(texts), repeats)]
    vectors = rng.normal(size=(rows, 8)).astype(np.float32)
    vectors[-repeats:] = vectors[rng.integers(0, rows - repeats, repeats)]
    keys = [f"s{i:03d}" for i in rng.permutation(rows)]
    return Persona(
        question_id="q",
        question=" ".join(rng.choice(WORDS, size=2)),
        row_ids=[f"q::{k}" for k in keys],
        session_ids=keys,
        created_at=[f"2023-01-{1 + i % 3:02d}T00:00:00Z" for i in range(rows)],
        texts=texts,
        vectors=vectors,
        query_vector=rng.normal(size=8).astype(np.float32),
    )


def old_reference(persona, name, limit, rank_all=False):
    """The pre-registry algorithm (reference.py before issue 21), spelled out: arms searched to
    the candidate pool (every row with rank_all), RRF k = 25 over the pools."""
    pool = candidate_pool(limit)
    depth = max(pool, len(persona.row_ids)) if rank_all else pool
    index = Bm25Index(persona)
    arms = {
        "dense": dense(persona, depth),
        "bm25": index.search(fts_and_query(persona.question), depth),
        "bm25-or": index.search(fts_or_query(persona.question), depth),
    }
    index.close()
    if name == "hybrid":
        return rrf([arms["dense"][:pool], arms["bm25"][:pool]], limit)
    if name == "hybrid-or":
        return rrf([arms["dense"][:pool], arms["bm25-or"][:pool]], limit)
    return arms[name] if rank_all else arms[name][:limit]


REFERENCE_PRESETS = ["dense", "bm25", "bm25-or", "hybrid", "hybrid-or"]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("limit,rank_all", [(5, False), (10, False), (3, True)])
def test_presets_rank_exactly_as_before(seed, limit, rank_all):
    persona = random_persona(seed, rows=30 + 20 * seed)
    new = search_persona(persona, REFERENCE_PRESETS, limit, rank_all)
    for name in REFERENCE_PRESETS:
        assert new[name] == old_reference(persona, name, limit, rank_all), name


def test_presets_are_family_settings():
    persona = random_persona(3)
    specs = registry.resolve(
        [
            "hybrid",
            "hybrid-or",
            "bm25-or",
            {"name": "h", "use": "hybrid"},
            {"name": "ho", "use": "hybrid", "query": "or"},
            {"name": "bo", "use": "bm25", "query": "or"},
        ]
    )
    out = search_persona(persona, specs, 10)
    assert out["h"] == out["hybrid"] and out["ho"] == out["hybrid-or"] and out["bo"] == out["bm25-or"]
    assert specs[0].setting() == specs[3].setting()
    assert specs[0].params == {"k": 25, "query": "and", "pool": None, "weights": [1.0, 1.0]}


def test_k_and_weights_give_weighted_rrf_scores():
    persona = random_persona(1)
    arms = persona_arms(persona)
    dense_first = arms.ranked["dense"][0][0]
    spec = registry.spec({"name": "w", "use": "hybrid", "k": 60, "weights": [2, 0.5], "query": "or"})
    indices, scores = rankers.rank(arms, spec, 10)
    bm25 = arms.ranked["bm25-or"][0].tolist()
    pool = candidate_pool(10)
    expected = 2 / 61 + (0.5 / (60 + bm25.index(dense_first) + 1) if dense_first in bm25[:pool] else 0)
    position = indices.tolist().index(dense_first) if dense_first in indices else None
    assert position is not None and scores[position] == pytest.approx(expected)
    assert list(scores) == sorted(scores, reverse=True)


def test_zero_bm25_weight_is_the_dense_order():
    persona = random_persona(2)
    only_dense = registry.spec({"name": "d", "use": "hybrid", "weights": [1, 0]})
    out = search_persona(persona, [only_dense, "dense"], 10)
    assert [r for r, _ in out["d"]] == [r for r, _ in out["dense"]]


def test_pool_limits_the_candidates_of_each_arm():
    persona = random_persona(4)
    arms = persona_arms(persona)
    spec = registry.spec({"name": "p", "use": "hybrid", "pool": 1, "query": "or"})
    indices, _ = rankers.rank(arms, spec, 10)
    firsts = {int(arms.ranked["dense"][0][0]), int(arms.ranked["bm25-or"][0][0])}
    assert set(indices.tolist()) == firsts


def test_fused_ties_go_to_the_smaller_row_id():
    from vipune_eval.stages.search.arms import Arms

    def first(row_ids):
        crossed = {
            "dense": (np.array([0, 1], np.int32), np.zeros(2)),
            "bm25-and": (np.array([1, 0], np.int32), np.zeros(2)),
        }
        arms = Arms("q", row_ids, row_ids, {**crossed, "bm25-or": crossed["bm25-and"]})
        indices, scores = rankers.rank(arms, registry.spec("hybrid"), 10)
        assert scores[0] == scores[1] == pytest.approx(1 / 26 + 1 / 27)
        return row_ids[indices[0]]

    assert first(["q::b", "q::a"]) == "q::a"
    assert first(["q::a", "q::b"]) == "q::a"


def test_arms_file_round_trip_gives_the_same_runs(tmp_path):
    personas = [random_persona(s) for s in range(3)]
    arms = [persona_arms(p) for p in personas]
    write_arms(tmp_path / "arms.parquet", arms)
    back = list(read_arms(tmp_path / "arms.parquet"))
    assert [a.question_id for a in back] == [a.question_id for a in arms]
    for spec in registry.resolve(REFERENCE_PRESETS + [{"name": "x", "use": "hybrid", "k": 3}]):
        for a, b in zip(arms, back):
            assert np.array_equal(rankers.rank(a, spec, 10)[0], rankers.rank(b, spec, 10)[0])
            assert a.documents(rankers.rank(a, spec, 10)[0], RankingSettings(10, 10)) == b.documents(
                rankers.rank(b, spec, 10)[0], RankingSettings(10, 10)
            )


def test_a_parquet_file_of_other_columns_is_no_arms_file(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"question_id": ["q"], "dense": [[0]]}), tmp_path / "old.parquet")
    with pytest.raises(
        EvalError,
        match=r"old.parquet is not an arms file of this version: its columns "
        r"are \['question_id', 'dense'\] \(rerun search_arms\)",
    ):
        list(read_arms(tmp_path / "old.parquet"))


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    "entry,words",
    [
        ("hybrid-and", ["unknown retriever 'hybrid-and'", "vipune-semantic", "hybrid-or"]),
        ({"name": "x", "use": "splade"}, ["unknown family 'splade'", "dense, bm25, hybrid"]),
        ({"name": "x", "use": "hybrid", "kk": 3}, ["no parameter 'kk'", "k, query, pool, weights"]),
        ({"name": "x", "use": "dense", "query": "or"}, ["no parameter 'query'", "none"]),
        ({"name": "x", "use": "hybrid", "k": 0}, ["hybrid.k", "got 0"]),
        ({"name": "x", "use": "hybrid", "k": "25"}, ["hybrid.k", "'25'"]),
        ({"name": "x", "use": "hybrid", "k": True}, ["hybrid.k"]),
        ({"name": "x", "use": "bm25", "query": "xor"}, ["bm25.query", "and | or", "'xor'"]),
        ({"name": "x", "use": "hybrid", "weights": [1]}, ["hybrid.weights", "[1]"]),
        ({"name": "x", "use": "hybrid", "weights": [-1, 1]}, ["hybrid.weights"]),
        ({"name": "x", "use": "hybrid", "weights": [float("inf"), 1]}, ["hybrid.weights", "finite", "inf"]),
        ({"name": "x", "use": "hybrid", "weights": [1, float("nan")]}, ["hybrid.weights", "finite", "nan"]),
        ({"name": "x", "use": "hybrid", "pool": 20000}, ["hybrid.pool", "1..10000"]),
        ({"use": "hybrid"}, ["'name'"]),
        ({"name": "a/b", "use": "hybrid"}, ["'name'"]),
        ({"name": "hybrid", "use": "hybrid", "k": 60}, ["taken by a preset"]),
        ({"name": "vipune-x", "use": "dense"}, ["taken by a preset or reserved for vipune's own runs"]),
        ({"name": "x"}, ["'use'"]),
        ({"name": "x", "use": "p.py:f", "k": 3}, ["a plugin takes no parameters"]),
        (3, ["a preset name or a mapping"]),
    ],
)
def test_the_registry_refuses_with_the_known_names(entry, words):
    with pytest.raises(EvalError) as info:
        registry.resolve(["dense", entry])
    for word in words:
        assert word in str(info.value)
    assert "retrievers[1]" in str(info.value)


def numeric_params():
    """(family, parameter, a value past every bound) of every family parameter that takes a number
    or a pair of numbers."""
    out = []
    for family in registry.FAMILIES.values():
        for name, param in family.params.items():
            for value, huge in ((1, 2**64), ([1, 1], [2**64, 1])):
                try:
                    param.check(value)
                except ValueError:
                    continue
                out.append((family.name, name, huge))
    return out


@pytest.mark.parametrize("family, name, huge", numeric_params(), ids=lambda v: str(v)[:12])
def test_every_number_a_family_takes_has_a_highest_value(family, name, huge):
    """Issue 51 item 5: a family setting k above 2^63 passed the check and overflowed numpy's
    int64 in fuse_reference (an OverflowError traceback); a what-if grid's values are family
    settings too (tests/unit/plan/test_whatif_grid.py)."""
    with pytest.raises(EvalError, match=rf"retrievers\[1\] \(x\): {family}\.{name} must be .*(\.\.| to )\d"):
        registry.resolve(["dense", {"name": "x", "use": family, name: huge}])


def test_the_walk_finds_k_pool_and_weights():
    assert {(f, n) for f, n, _ in numeric_params()} == {("hybrid", "k"), ("hybrid", "pool"), ("hybrid", "weights")}


def test_the_highest_k_and_weights_rank_as_equal_weights_do():
    """At the highest values the fusion still runs (no overflow) and ranks as any equal weights."""
    arms = persona_arms(random_persona(1))
    highest = registry.spec(
        {"name": "x", "use": "hybrid", "k": registry.MAX_RRF_K, "weights": [registry.MAX_WEIGHT, registry.MAX_WEIGHT]}
    )
    plain = registry.spec({"name": "y", "use": "hybrid", "k": registry.MAX_RRF_K})
    assert rankers.rank(arms, highest, 10)[0].tolist() == rankers.rank(arms, plain, 10)[0].tolist()


def test_two_entries_with_one_name_are_refused():
    with pytest.raises(EvalError, match="two entries are named 'h'"):
        registry.resolve([{"name": "h", "use": "hybrid"}, {"name": "h", "use": "hybrid", "k": 5}])


def test_canonical_json_names_every_parameter_and_round_trips():
    spec = registry.spec({"name": "h", "use": "hybrid", "weights": [1, 2]})
    data = json.loads(spec.canonical())
    assert data == {"name": "h", "use": "hybrid", "k": 25, "query": "and", "pool": None, "weights": [1.0, 2.0]}
    assert registry.from_argument(spec.canonical()) == spec
    assert registry.from_argument("hybrid") == registry.spec("hybrid")
    other = registry.spec({"name": "h", "use": "hybrid", "weights": [1, 2], "k": 26})
    assert other.canonical() != spec.canonical()


def test_vipune_presets_name_the_setting_they_mirror():
    specs = registry.resolve(["vipune", "vipune-semantic", {"name": "h", "use": "hybrid"}, "dense"])
    assert registry.uses_binary(specs) and [s.name for s in specs if s.reference] == ["h", "dense"]
    assert [s.mirror for s in specs[:2]] == [registry.spec("hybrid").setting(), registry.spec("dense").setting()]


def test_prepare_refuses_before_writing_anything(tmp_path, monkeypatch):
    from support.config import SCHEMA
    from vipune_eval.plan import workspace

    monkeypatch.chdir(tmp_path)
    config = {
        "retrievers": ["dense", {"name": "x", "use": "hybird"}],
        "ks": [1],
        "search_limit": 10,
        "search": {"row_limit": 100},
        "dataset": {"path": str(tmp_path / "none.json")},
        "model": {"path": None},
    }
    with pytest.raises(EvalError, match="unknown family 'hybird'"):
        workspace.prepare(config, SCHEMA)
    assert not os.listdir(tmp_path)
