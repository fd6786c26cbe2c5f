"""sweep: fastembed's padded batches over batch size x threads, against the machine's limit.

The batching the harness used before token budgets (issue 23): fastembed batches of a fixed size,
each padded to its longest text, on the graph ``embed.load_model`` gives. The harness's own
sweep (token budgets x threads) is ``bench_embed_flops.py``; this one shows what batch size and
threads do to fastembed's plain loop and to peak RSS.

Long texts (generated sessions, cut to 512 tokens) and short ones (the first 15-30 words of a
session's turns); every (kind, batch, threads) in its own process (so its peak RSS is its own),
in a shuffled order per rep. Each config is read as a ratio to batch 4 at 2 threads (the padded
harness's old setting) of the same rep, and its FLOP rate (MiniLM-shaped encoder at the texts'
mean length) as a fraction of a float32 numpy matmul timed in the same run at the same threads.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import ENCODERS, REPS, Figures, embed_rate, interleaved, matmul_peak, mean, sized
from vipune_eval.stages.embed.projection import flops_per_token

SIZES = {
    "small": dict(batches=[1, 4, 16], threads=[1, 2], long=8, short=96),
    "M": dict(batches=[1, 2, 4, 8, 16, 32, 64], threads=[1, 2], long=64, short=512),
}
DEFAULT = (4, 2)  # batch, threads: the padded harness's old setting ("batch 4" below)


def bench_sweep(benchmark, work, embed_model, session_texts):
    z = sized(SIZES)
    dest = work / "sweep"
    dest.mkdir()
    rng = random.Random(0)
    sessions = pq.read_table(session_texts).column("text").to_pylist()
    long_texts = sessions[: z["long"]]
    turns = [line for s in sessions for line in s.split("\n")]
    short = []
    for line in rng.sample(turns, min(z["short"], len(turns))):
        words = line.split()
        short.append(" ".join(words[: rng.randint(15, 30)]))
    kinds = {"long": dest / "long.parquet", "short": dest / "short.parquet"}
    pq.write_table(pa.table({"text": long_texts}), kinds["long"])
    pq.write_table(pa.table({"text": short}), kinds["short"])
    configs = [(k, b, t) for k in kinds for t in z["threads"] for b in z["batches"]]

    runs: dict[tuple, list[dict]] = {c: [] for c in configs}
    peaks: dict[int, list[float]] = {t: [] for t in z["threads"]}

    def one_rep(rep: int) -> None:
        order = configs[:]
        random.Random(rep).shuffle(order)
        for t in z["threads"]:
            peaks[t].append(matmul_peak(t, dest / f"matmul-t{t}-{rep}.log"))
        for kind, b, t in order:
            runs[(kind, b, t)].append(embed_rate(kinds[kind], embed_model, t, b, dest / f"{kind}-b{b}-t{t}-{rep}.log"))

    interleaved(benchmark, {"rep": one_rep})
    peak = {t: max(v) for t, v in peaks.items()}  # others' load only lowers a peak
    fig = Figures(
        f"sweep: {embed_model.name}, {len(long_texts)} long + {len(short)} short texts, {REPS} reps, shuffled",
        [
            "kind",
            "mean tokens",
            "threads",
            "batch",
            "texts/s (mean)",
            "/ batch 4, 2 threads (same rep)",
            "peak RSS MiB",
            "GFLOP/s",
            "/ matmul peak",
        ],
    )
    shape = ENCODERS["MiniLM-L6"]  # the FLOP figures assume a MiniLM-L6-shaped encoder
    for kind, b, t in sorted(configs, key=lambda c: (c[0], c[2], c[1])):
        rs, ds = runs[(kind, b, t)], runs[(kind, *DEFAULT)] if (kind, *DEFAULT) in runs else None
        mean_tokens = rs[0]["mean_tokens"]
        gflops = mean([r["tokens_per_s"] for r in rs]) * flops_per_token(**shape, seq=round(mean_tokens)) / 1e9
        vs_default = mean([r["texts_per_s"] / d["texts_per_s"] for r, d in zip(rs, ds)]) if ds else float("nan")
        fig.row(
            kind,
            round(mean_tokens),
            t,
            b,
            mean([r["texts_per_s"] for r in rs]),
            vs_default,
            max(r["peak_rss_mib"] for r in rs),
            gflops,
            gflops / peak[t],
        )
    for t in z["threads"]:
        fig.note(f"float32 2048x2048 numpy matmul, {t} thread(s): {peak[t]:.0f} GFLOP/s (best of the run)")
    for kind in kinds:
        best = max((c for c in configs if c[0] == kind), key=lambda c: mean([r["texts_per_s"] for r in runs[c]]))
        fig.ratio(
            f"{kind}: batch 4, 2 threads / best (batch {best[1]}, threads {best[2]})",
            mean([r["texts_per_s"] for r in runs[(kind, *DEFAULT)]]),
            mean([r["texts_per_s"] for r in runs[best]]),
        )
    if embed_model.name == "tiny test model":
        fig.note("the tiny test model is not a BERT: its GFLOP/s figures mean nothing")
    fig.record(benchmark)
