"""embed: `vipune-eval embed` next to a bare fastembed loop, each in its own process.

Same texts (generated sessions, cut to 512 tokens by the model), model and threads; the harness
batches by token budget (texts of one length, 2048 tokens: the workflow's default), the bare loop
as the harness did before (length-sorted batches of 4, padded). The ratio is the harness's
overhead (start-up, token counting, its vector store, Parquet writing) net of what its batching
saves. The vectors of both must agree. Padded batches against token budgets inside one process,
as FLOP/s, are bench_embed_flops.py; the shared pieces are in conftest.py and common.py.
"""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq

from benchmarks.common import PYTHON, Figures, embed_cmd, interleaved, mean, run_child

THREADS, BATCH_TOKENS = 2, 2048  # the harness defaults (docs/configuration.md)
BATCH = 4  # the bare loop: fastembed batches of 4 (the harness before token budgets)

BARE_EMBED = r"""
import json, sys, time
import numpy as np, pyarrow.parquet as pq
from fastembed import TextEmbedding
from fastembed.common.model_description import ModelSource, PoolingType
texts_path, model_dir, file, threads, batch, out = sys.argv[1:7]
table = pq.read_table(texts_path)
texts, ids = table.column("text").to_pylist(), table.column("text_id").to_pylist()
TextEmbedding.add_custom_model(model="bench/bare", pooling=PoolingType.MEAN, normalization=True,
                               sources=ModelSource(hf="bench/bare"), dim=384, model_file=file)
t0 = time.perf_counter()
model = TextEmbedding("bench/bare", specific_model_path=model_dir, threads=int(threads))
t1 = time.perf_counter()
order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
vectors = np.stack(list(model.embed([texts[i] for i in order], batch_size=int(batch))))
t2 = time.perf_counter()
np.save(out, vectors)
print(json.dumps({"ids": [ids[i] for i in order], "load_s": t1 - t0, "embed_s": t2 - t1}))
"""


def bench_embed(benchmark, work, embed_model, session_texts):
    dest = work / "embed"
    n = pq.read_metadata(session_texts).num_rows
    harness = lambda rep: run_child(
        embed_cmd(embed_model, session_texts, dest / f"harness-{rep}.parquet", THREADS, BATCH_TOKENS),
        dest / f"harness-{rep}.log",
    )
    bare = lambda rep: run_child(
        [
            PYTHON,
            "-c",
            BARE_EMBED,
            session_texts,
            embed_model.dir,
            embed_model.file,
            THREADS,
            BATCH,
            dest / f"bare-{rep}.npy",
        ],
        dest / f"bare-{rep}.log",
    )
    runs = interleaved(benchmark, {"harness": harness, "bare": bare})

    inner = [r.json() for r in runs["bare"]]
    h = pq.read_table(dest / "harness-0.parquet")
    hv = dict(
        zip(
            h.column("text_id").to_pylist(),
            np.asarray(h.column("embedding").combine_chunks().values).reshape(h.num_rows, -1),
        )
    )
    bv = np.load(dest / "bare-0.npy")
    diff = float(max(np.abs(hv[i] - v).max() for i, v in zip(inner[0]["ids"], bv)))

    fig = Figures(
        f"embed: {n} session texts, {embed_model.name}, threads {THREADS}, "
        f"harness batches of {BATCH_TOKENS} tokens, bare batches of {BATCH}",
        ["", "wall s (mean)", "texts/s", "CPU s", "peak RSS MiB"],
    )
    hw, bw = mean([r.wall_s for r in runs["harness"]]), mean([r.wall_s for r in runs["bare"]])
    embed_only = mean([i["embed_s"] for i in inner])
    fig.row(
        "vipune-eval embed (process)",
        hw,
        n / hw,
        mean([r.cpu_s for r in runs["harness"]]),
        max(r.peak_rss_mib for r in runs["harness"]),
    )
    fig.row(
        "bare fastembed loop (process)",
        bw,
        n / bw,
        mean([r.cpu_s for r in runs["bare"]]),
        max(r.peak_rss_mib for r in runs["bare"]),
    )
    fig.row("bare loop, embed() only", embed_only, n / embed_only, "", "")
    fig.ratio("harness / bare (process wall)", hw, bw)
    fig.ratio("harness / bare (CPU)", mean([r.cpu_s for r in runs["harness"]]), mean([r.cpu_s for r in runs["bare"]]))
    fig.ratio("bare embed() / bare process (wall)", embed_only, bw)
    fig.note(f"max |difference| between the two processes' vectors: {diff:.1e}")
    fig.record(benchmark)
    assert diff < 1e-4, f"harness and bare vectors differ by {diff}"  # a correctness check, not a timing
