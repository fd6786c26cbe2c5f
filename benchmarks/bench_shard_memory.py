"""shard-memory: peak RSS of one search job as its shard holds more personas.

Turn rows of a generated file (every persona has the same number of rows), random unit 384-d
vectors in the embed stage's schema (search does not check the model), and both lanes
(`search-arms`: the shared arms of the turn view's personas, every row ranked, and
`search-vipune` with the fake binary) on shard 0 of 8 / 4 / 2 = 2 / 4 / 8 personas, the
configurations interleaved. Read: the fixed cost (2 personas) and the growth per persona; a job
that streams its personas grows little from 2 to 8. For `search-vipune` the peak is the largest
process of the tree, which may be the fake binary's.
"""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import Figures, cli, generate, interleaved, mean, run_child, sized

# 16 personas of sessions x turns rows each. M: 500 x 22 turns of 150 words = 11 000 rows each.
SIZES = {
    "small": dict(
        instances=16,
        abstention=0,
        sessions_per_haystack=100,
        filler_pool=400,
        turns_per_session=10,
        words_per_turn=60,
        seed=5,
    ),
    "M": dict(
        instances=16,
        abstention=0,
        sessions_per_haystack=500,
        filler_pool=2000,
        turns_per_session=22,
        words_per_turn=150,
        seed=5,
    ),
}
PERSONAS = (2, 4, 8)
LANES = ("reference", "vipune")


def random_embeddings(texts: pa.Table, out) -> None:
    from vipune_eval.stages.embed.embed import embeddings_schema

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((texts.num_rows, 384), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    key = hashlib.sha256(b"random-vectors-benchmark").hexdigest()[:16]
    pq.write_table(
        pa.table(
            {
                "text_id": texts.column("text_id"),
                "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 384),
                "tokens": pa.array(np.full(texts.num_rows, 100, np.int32)),
                "truncated": pa.array(np.zeros(texts.num_rows, bool)),
            },
            schema=embeddings_schema(384, key),
        ),
        out,
    )


def bench_shard_memory(benchmark, work, fake_vipune, vipune_home, vipune_fingerprint):
    dest = work / "shard-memory"
    data = generate(sized(SIZES))
    run_child(
        cli(
            "filter-rows",
            dataset=data,
            protocol="seed",
            granularity="turn",
            rows_out=dest / "rows.parquet",
            texts_out=dest / "texts.parquet",
        ),
        dest / "filter-rows.log",
    )
    emb = dest / "embeddings.parquet"
    random_embeddings(pq.read_table(dest / "texts.parquet", columns=["text_id"]), emb)
    per_persona = (
        pq.read_table(dest / "rows.parquet", columns=["row_keys"])
        .column("row_keys")
        .combine_chunks()
        .value_lengths()
        .to_numpy()
    )
    pairs = len(per_persona)
    common = dict(
        rows=dest / "rows.parquet", texts=dest / "texts.parquet", embeddings=[emb], shard=0, limit=1000, depth=10
    )

    def job(lane: str, n: int, rep: int):
        out = dest / f"{lane}-{n}-{rep}"
        if lane == "reference":
            cmd = cli("search-arms", **common, shards=pairs // n, arms_out=out / "arms.parquet")
        else:
            shutil.rmtree(out / "cache", ignore_errors=True)
            cmd = cli(
                "search-vipune",
                **common,
                shards=pairs // n,
                binary=fake_vipune,
                fingerprint=vipune_fingerprint,
                hf_home=vipune_home,
                threads=1,
                timeout=600,
                on_error="stop",
                cache=out / "cache",
                tmp=out / "tmp",
                out=out / "vipune.run",
                semantic_out=out / "semantic.run",
                status_out=out / "status.json",
            )
        return run_child(cmd, dest / f"{lane}-{n}-{rep}.log")

    runs = interleaved(
        benchmark, {(lane, n): (lambda rep, lane=lane, n=n: job(lane, n, rep)) for n in PERSONAS for lane in LANES}
    )
    fig = Figures(
        f"shard-memory: {pairs} personas of {per_persona.min()}-{per_persona.max()} turn rows, "
        f"{pq.read_metadata(dest / 'texts.parquet').num_rows} unique texts, shard 0 of 8 / 4 / 2",
        ["lane", "personas", "rows", "peak RSS MiB (reps)", "wall s (mean)"],
    )
    for lane in LANES:
        for n in PERSONAS:
            rs = runs[(lane, n)]
            fig.row(
                lane,
                n,
                int(per_persona[0 :: pairs // n].sum()),
                "/".join(f"{r.peak_rss_mib:.0f}" for r in rs),
                mean([r.wall_s for r in rs]),
            )
        worst = {n: max(r.peak_rss_mib for r in runs[(lane, n)]) for n in PERSONAS}
        fig.ratio(f"{lane}: peak RSS 8 personas / 2 personas", worst[8], worst[2])
        fig.note(
            f"{lane}: growth per persona {(worst[8] - worst[2]) / 6:.1f} MiB over a fixed "
            f"{worst[2] - 2 * (worst[8] - worst[2]) / 6:.0f} MiB (worst rep, linear fit of 2 and 8)"
        )
    fig.record(benchmark)
