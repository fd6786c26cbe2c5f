"""granularities: what session, turn and chunk rows of one file cost, side by side.

`filter-rows --granularity G` on the same generated file for each G (chunk with the embed
model's tokenizer), in rotating order; the unique texts' tokens counted with the package's
`count_tokens` (tokens embedded = sum of min(tokens, 512), what the model sees); then the embed
model's texts/s on a fixed-seed sample of each granularity's unique texts, each in its own
process, rotating. Estimated embed time of a view = unique texts / texts/s, as a ratio to the
session view (the absolute hours on this machine are printed too, for the record).
"""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq

from benchmarks.common import (
    ENCODERS,
    Figures,
    cli,
    embed_rate,
    generate,
    interleaved,
    mean,
    run_child,
    sample_texts,
    sized,
)
from vipune_eval.stages.embed.projection import flops_per_token

GRANULARITIES = ("session", "turn", "chunk")
# M: the LongMemEval_M-like file (2.6 GB) of the filter benchmark.
SIZES = {
    "small": (
        dict(
            instances=10,
            abstention=1,
            sessions_per_haystack=40,
            filler_pool=300,
            turns_per_session=12,
            words_per_turn=150,
            seed=1,
        ),
        12,
    ),
    "M": (
        dict(
            instances=500,
            abstention=30,
            sessions_per_haystack=500,
            filler_pool=20000,
            turns_per_session=12,
            words_per_turn=150,
            seed=1,
        ),
        200,
    ),
}
THREADS, BATCH = 2, 4


def bench_granularities(benchmark, work, embed_model):
    from vipune_eval.core.tokens import count_tokens

    args, n_sample = sized(SIZES)
    data = generate(args)
    dest = work / "granularities"
    tokenizer = embed_model.dir / "tokenizer.json"

    def filter_rows(g: str, rep: int):
        out = dest / g
        extra = {"tokenizer": tokenizer} if g == "chunk" else {}
        return run_child(
            cli(
                "filter-rows",
                dataset=data,
                protocol="seed",
                granularity=g,
                rows_out=out / "rows.parquet",
                texts_out=out / "texts.parquet",
                **extra,
            ),
            out / f"filter-rows-{rep}.log",
        )

    def embed(g: str, rep: int):
        return embed_rate(dest / g / "sample.parquet", embed_model, THREADS, BATCH, dest / g / f"embed-{rep}.log")

    # rotating order per rep: session, turn, chunk / chunk, turn, session / ...
    filtered = interleaved(benchmark, {g: (lambda rep, g=g: filter_rows(g, rep)) for g in GRANULARITIES})
    stats = {}
    for g in GRANULARITIES:
        texts = pq.read_table(dest / g / "texts.parquet").column("text").to_pylist()
        tokens = count_tokens(embed_model.dir, texts)
        stats[g] = {
            "unique": len(texts),
            "tokens": int(tokens.sum()),
            "embedded": int(np.minimum(tokens, 512).sum()),
            "median": int(np.median(tokens)),
            "row_slots": int(
                pq.read_table(dest / g / "rows.parquet", columns=["row_keys"])
                .column("row_keys")
                .combine_chunks()
                .value_lengths()
                .to_numpy()
                .sum()
            ),
        }
        sample_texts(dest / g / "texts.parquet", n_sample, dest / g / "sample.parquet")
    rates = {g: [] for g in GRANULARITIES}
    for rep in range(len(filtered["session"])):  # the embed reps, rotating like the filter's
        for g in GRANULARITIES if rep % 2 == 0 else GRANULARITIES[::-1]:
            rates[g].append(embed(g, rep))

    fig = Figures(
        f"granularities: {data.stat().st_size / 1e6:.0f} MB file, {embed_model.name}, "
        f"{n_sample} sampled texts each, threads {THREADS}, batch {BATCH}",
        [
            "granularity",
            "unique texts",
            "row slots",
            "tokens",
            "tokens embedded",
            "median tokens",
            "filter-rows s",
            "peak RSS MiB",
            "texts/s",
            "tokens/s",
            "est. embed h",
        ],
    )
    hours = {}
    for g in GRANULARITIES:
        s, f = stats[g], filtered[g]
        tps = mean([r["texts_per_s"] for r in rates[g]])
        hours[g] = s["unique"] / tps / 3600
        fig.row(
            g,
            s["unique"],
            s["row_slots"],
            s["tokens"],
            s["embedded"],
            s["median"],
            mean([r.wall_s for r in f]),
            max(r.peak_rss_mib for r in f),
            tps,
            mean([r["tokens_per_s"] for r in rates[g]]),
            hours[g],
        )
    for g in ("turn", "chunk"):
        fig.ratio(f"{g} / session: unique texts", stats[g]["unique"], stats["session"]["unique"])
        fig.ratio(f"{g} / session: tokens embedded", stats[g]["embedded"], stats["session"]["embedded"])
        fig.ratio(
            f"{g} / session: filter-rows wall",
            mean([r.wall_s for r in filtered[g]]),
            mean([r.wall_s for r in filtered["session"]]),
        )
        fig.ratio(f"{g} / session: est. embed time", hours[g], hours["session"])
    fig.ratio(
        "bge-small / MiniLM-L6 FLOPs per token (seq 512)",
        flops_per_token(**ENCODERS["bge-small-en-v1.5"], seq=512),
        flops_per_token(**ENCODERS["MiniLM-L6"], seq=512),
    )
    fig.note("est. embed h = unique texts / measured texts/s on this machine at this moment (absolute: noisy)")
    fig.record(benchmark)
