"""embed FLOPs: the exported graph in padded batches, and token budgets on the graph embed runs,
as useful FLOP/s over the machine's peak.

Side by side in one process per (rep, thread count), the settings in alternating order:

- ``exported, padded``: the harness before issue 23: the model's exported graph (softmax NaN
  guards included), texts sorted by length, fastembed batches of 4, each padded to its longest;
- ``exported, budget 2048``: the exported graph in ``embed.embed_batched``'s token-budget batches
  (texts of one token length, at most 2048 tokens, nothing padded): the harness before the guards
  were dropped;
- ``budget N``: what ``embed`` runs now: ``embed.load_model``'s graph (``onnx_graph``: the guards
  dropped) in token-budget batches of at most N tokens.

Each on a fixed-seed sample of the session, turn and chunk rows (``filter-rows``, chunk with the
model's tokenizer) of a generated file of long sessions (12 turns x 150 words). Useful FLOP/s =
unpadded tokens (cut at 512) x the model's layer shapes from its config.json (attention
included, ``projection.workload_flops``) / the best time of the run; over a float32 numpy matmul
timed at the same thread count in the same rounds (best seen). Vectors are checked: budget batches against
one text at a time (bit for bit), the rewritten graph against the exported one at budget 2048
(bit for bit) and against the padded batches (max |difference|).

The projection: bge-small-en-v1.5 (12 layers, same widths) over LongMemEval_M's texts per
granularity (``projection.LONGMEMEVAL_M``) at each setting's useful FLOP/s (minutes, an estimate;
the report makes the same projection from a run's own embed jobs).
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import ENCODERS, PYTHON, Figures, cli, generate, interleaved, matmul_peak, run_child, sized
from vipune_eval.stages.embed.projection import BGE_SMALL, LONGMEMEVAL_M, workload_flops
from vipune_eval.stages.embed.tally import encoder_shape

GRANULARITIES = ("session", "turn", "chunk")
# small: the granularities benchmark's file; M: 40 instances of LongMemEval_M's shape.
SIZES = {
    "small": dict(
        data=dict(
            instances=10,
            abstention=1,
            sessions_per_haystack=40,
            filler_pool=300,
            turns_per_session=12,
            words_per_turn=150,
            seed=1,
        ),
        sample={"session": 12, "turn": 40, "chunk": 12},
    ),
    "M": dict(
        data=dict(
            instances=40,
            abstention=3,
            sessions_per_haystack=500,
            filler_pool=3000,
            turns_per_session=12,
            words_per_turn=150,
            seed=1,
        ),
        sample={"session": 24, "turn": 80, "chunk": 24},
    ),
}
THREADS = (1, 2)
BUDGETS = (512, 1024, 2048, 4096)
PADDED_BATCH = 4
PADDED, EXPORTED = "exported, padded", "exported, budget 2048"
SETTINGS = [PADDED, EXPORTED, *(f"budget {b}" for b in BUDGETS)]

FLOPS_CHILD = r"""
import json, sys, time
from pathlib import Path
import numpy as np, pyarrow.parquet as pq
from fastembed import TextEmbedding
from fastembed.common.model_description import ModelSource, PoolingType
from vipune_eval.stages.embed.embed import embed_batched, load_model, model_dim
from vipune_eval.core.io import Progress
model_dir, file, pooling, threads, reverse, padded_batch = sys.argv[1:7]
budgets = [int(b) for b in sys.argv[7].split(",")]
samples = sys.argv[8:]
model = load_model(Path(model_dir), file, pooling, threads=int(threads))
# the exported graph as it is, through fastembed (load_model's recipe without onnx_graph)
TextEmbedding.add_custom_model(model="bench/exported", pooling=getattr(PoolingType, pooling.upper()),
                               normalization=True, sources=ModelSource(hf="bench/exported"),
                               dim=model_dim(Path(model_dir)), model_file=file)
exported = TextEmbedding("bench/exported", specific_model_path=model_dir, threads=int(threads))

def padded(texts, lengths):
    order = np.argsort(lengths, kind="stable")
    vectors = np.stack(list(exported.embed([texts[i] for i in order], batch_size=int(padded_batch))))
    out = np.empty_like(vectors)
    out[order] = vectors
    return out

def budget(texts, lengths, tokens, graph=model):
    parts = {}
    embed_batched(graph, texts, lengths, tokens, Progress("bench", len(texts), every=1e9),
                  lambda rows, vectors: parts.update(zip(rows.tolist(), vectors)))
    return np.stack([parts[i] for i in range(len(texts))])

settings = [("exported, padded", padded),
            ("exported, budget 2048", lambda t, l: budget(t, l, 2048, exported))]
settings += [(f"budget {b}", lambda t, l, b=b: budget(t, l, b)) for b in budgets]
if reverse == "1":
    settings.reverse()
result = {}
for path in samples:
    t = pq.read_table(path)
    texts, lengths = t.column("text").to_pylist(), t.column("tokens").to_numpy()
    seconds, vectors = {}, {}
    for name, run in settings:
        start = time.perf_counter()
        vectors[name] = run(texts, lengths)
        seconds[name] = time.perf_counter() - start
    alone = np.stack([next(iter(model.embed([s], batch_size=1))) for s in texts[:4]])
    result[path] = {"seconds": seconds, "budget_vs_alone_bit_equal": all(
        bool(np.array_equal(vectors[f"budget {b}"][:4], alone)) for b in budgets),
        "rewritten_vs_exported_bit_equal": bool(np.array_equal(vectors["budget 2048"], vectors["exported, budget 2048"])),
        "budget_vs_padded_max_abs": float(max(np.abs(vectors[f"budget {b}"] - vectors["exported, padded"]).max()
                                              for b in budgets))}
print(json.dumps(result))
"""


def useful_flops(lengths: np.ndarray, shape: dict[str, int]) -> float:
    """Forward FLOPs over texts of ``lengths`` tokens, no padding (attention at each text's length)."""
    lengths = lengths.astype(np.float64)
    return workload_flops(shape, lengths.sum(), (lengths * lengths).sum())


def bench_embed_flops(benchmark, work, embed_model):
    from vipune_eval.core.tokens import count_tokens

    z = sized(SIZES)
    data = generate(z["data"])
    dest = work / "embed-flops"
    samples, lengths = {}, {}
    for g in GRANULARITIES:
        extra = {"tokenizer": embed_model.dir / "tokenizer.json"} if g == "chunk" else {}
        run_child(
            cli(
                "filter-rows",
                dataset=data,
                protocol="seed",
                granularity=g,
                rows_out=dest / g / "rows.parquet",
                texts_out=dest / g / "texts.parquet",
                **extra,
            ),
            dest / g / "filter-rows.log",
        )
        texts = [t for t in pq.read_table(dest / g / "texts.parquet").column("text").to_pylist() if t]
        texts = random.Random(0).sample(texts, min(z["sample"][g], len(texts)))
        lengths[g] = np.minimum(count_tokens(embed_model.dir, texts), 512)
        samples[g] = dest / g / "sample.parquet"
        pq.write_table(pa.table({"text": texts, "tokens": pa.array(lengths[g], pa.int64())}), samples[g])
    shape = encoder_shape(embed_model.dir)
    bert = shape is not None
    shape = shape or ENCODERS["MiniLM-L6"]

    peaks: dict[int, list[float]] = {t: [] for t in THREADS}

    def side(threads: int, rep: int) -> dict:
        peaks[threads].append(matmul_peak(threads, dest / f"matmul-t{threads}-{rep}.log"))
        child = run_child(
            [
                PYTHON,
                "-c",
                FLOPS_CHILD,
                embed_model.dir,
                embed_model.file,
                embed_model.pooling,
                threads,
                rep % 2,
                PADDED_BATCH,
                ",".join(map(str, BUDGETS)),
                *[samples[g] for g in GRANULARITIES],
            ],
            dest / f"embed-t{threads}-{rep}.log",
        )
        return {g: child.json()[str(samples[g])] for g in GRANULARITIES}

    runs = interleaved(benchmark, {t: (lambda rep, t=t: side(t, rep)) for t in THREADS})
    peak = {t: max(v) for t, v in peaks.items()}  # others' load only lowers a peak
    best = {
        (g, t, s): min(r[g]["seconds"][s] for r in runs[t]) for g in GRANULARITIES for t in THREADS for s in SETTINGS
    }
    gflops = {k: useful_flops(lengths[k[0]], shape) / v / 1e9 for k, v in best.items()}

    fig = Figures(
        f"embed FLOPs: {embed_model.name}, the exported graph (padded batches of {PADDED_BATCH}; budget "
        f"2048) vs the graph embed runs (guards dropped) at token budgets, "
        f"{', '.join(f'{len(lengths[g])} {g}' for g in GRANULARITIES)} texts (best of the run)",
        ["granularity", "threads", "setting", "mean tokens", "texts/s", "useful GFLOP/s", "/ matmul peak"],
    )
    for g in GRANULARITIES:
        for t in THREADS:
            for s in SETTINGS:
                fig.row(
                    g,
                    t,
                    s,
                    float(lengths[g].mean()),
                    len(lengths[g]) / best[(g, t, s)],
                    gflops[(g, t, s)],
                    gflops[(g, t, s)] / peak[t],
                )
    top = max(THREADS)
    for g in GRANULARITIES:
        b = max(SETTINGS[2:], key=lambda s: gflops[(g, top, s)])
        fig.ratio(f"{g}, {top} threads: {b} / {PADDED} (useful FLOP/s)", gflops[(g, top, b)], gflops[(g, top, PADDED)])
        fig.ratio(
            f"{g}, {top} threads: {b} / {EXPORTED} (useful FLOP/s)", gflops[(g, top, b)], gflops[(g, top, EXPORTED)]
        )
        for s in (b, EXPORTED, PADDED):
            fig.ratio(f"{g}, {top} threads: {s} / matmul peak", gflops[(g, top, s)], peak[top])
        work = LONGMEMEVAL_M[g]
        minutes = {
            s: workload_flops(BGE_SMALL, work["tokens"], work["squares"]) / (gflops[(g, top, s)] * 1e9) / 60
            for s in (b, EXPORTED, PADDED)
        }
        fig.note(
            f"projected bge-small on LongMemEval_M, {g} rows ({work['texts']} unique), {top} threads: "
            f"{minutes[b]:.0f} min ({b}; {EXPORTED}: {minutes[EXPORTED]:.0f} min; {PADDED} batches of "
            f"{PADDED_BATCH}: {minutes[PADDED]:.0f} min)"
        )
    for t in THREADS:
        fig.note(f"float32 2048x2048 numpy matmul, {t} thread(s): {peak[t]:.0f} GFLOP/s (best of the run)")
    checks = {
        f"{g}/{t}": (
            all(r[g]["budget_vs_alone_bit_equal"] for r in runs[t]),
            all(r[g]["rewritten_vs_exported_bit_equal"] for r in runs[t]),
            max(r[g]["budget_vs_padded_max_abs"] for r in runs[t]),
        )
        for g in GRANULARITIES
        for t in THREADS
    }
    fig.note(
        "budget batches bit-equal to one text at a time (first 4 texts): "
        + ", ".join(f"{k} {'yes' if eq else 'NO'}" for k, (eq, _, _) in checks.items())
    )
    fig.note(
        "guards dropped bit-equal to the exported graph (budget 2048, every text): "
        + ", ".join(f"{k} {'yes' if eq else 'NO'}" for k, (_, eq, _) in checks.items())
    )
    fig.note(f"max |budget - {PADDED}| over every setting: {max(d for _, _, d in checks.values()):.1e}")
    if not bert:
        fig.note(f"{embed_model.name} has no BERT config.json: the FLOP figures assume MiniLM-L6 and mean nothing")
    fig.record(benchmark)
