"""Embed throughput as a fraction of the machine's float32 matmul peak (issue 23).

    python benchmarks/bench_embed_flops.py                      # the sweep, about 10 min on 2 cores
    python benchmarks/bench_embed_flops.py --threads 2 --budgets 2048 --repeats 1   # one setting

Standalone: needs the package (``pip install -e .``), tests/support (the data generator) and a
real BERT-shaped ONNX model folder (default: the all-MiniLM-L6 stand-in under /work/shared; its
README explains why). Nothing is asserted; figures are printed and written to
``benchmarks/out/embed-flops.json``.

What it measures, side by side in one process (the machine is shared: read the ratios):
- ``padded``: the code before issue 23 — texts sorted by length, fastembed batches of 4, each
  batch padded to its longest text;
- ``budget N``: ``embed.embed_batched`` — batches of texts of one token length, at most N tokens,
  no padding — for each budget and thread count of the sweep.
Each on a fixed-seed sample of the session, turn and chunk rows of a generated file of
LongMemEval_M's shape (40 instances x 500 sessions x 12 turns of 150 words). The figure: useful
FLOP/s — unpadded tokens (truncated at 512) x the model's layer shapes from its config.json,
attention included — over a numpy float32 2048² matmul at the same thread count, timed in this
run (best of several, before and after). Vectors are checked: the budget batches against one text
at a time (bit for bit) and against the padded batches (max abs difference).

The projection: bge-small-en-v1.5 (12 layers, same widths) over LongMemEval_M's unique texts
(counts measured on the full M-shaped file, README "Performance"), at the best setting's useful
FLOP/s for each granularity.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "out"
sys.path.insert(0, str(REPO / "tests"))
MINILM = Path("/work/shared/models/all-MiniLM-L6-v2-onnx")
BGE_SMALL = dict(layers=12, hidden=384, intermediate=1536)
# Unique texts of LongMemEval_M per granularity (each embedded once across views), measured on
# the full M-shaped generated file (README "Performance", 2026-12-03).
M_UNIQUE_TEXTS = {"session": 21_126, "turn": 248_342, "chunk": 124_406}
DATA_ARGS = dict(instances=40, abstention=3, sessions_per_haystack=500, filler_pool=3000,
                 turns_per_session=12, words_per_turn=150, seed=1)
SAMPLE = {"session": 24, "turn": 80, "chunk": 24}

MATMUL = r"""
import sys, time, numpy as np
n = 2048
a, b = np.random.rand(n, n).astype(np.float32), np.random.rand(n, n).astype(np.float32)
a @ b
best = 0.0
for _ in range(int(sys.argv[1])):
    t = time.perf_counter(); a @ b; best = max(best, 2 * n ** 3 / (time.perf_counter() - t))
print(best)
"""


def say(*args) -> None:
    print(*args, flush=True)


def matmul_gflops(threads: int, reps: int = 8) -> float:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, "-c", MATMUL, str(reps)], env=env, capture_output=True,
                         text=True, check=True)
    return float(out.stdout.split()[-1]) / 1e9


def flops(lengths, layers: int, hidden: int, intermediate: int) -> float:
    """Forward FLOPs of a BERT encoder over texts of ``lengths`` tokens: 2 x (Q, K, V, output
    4h², FFN 2hi) per token, plus Q·Kᵀ and A·V (2·L·h each) per token. Embeddings, layer norms,
    softmax and GELU are left out (a few per cent)."""
    import numpy as np
    lengths = np.asarray(lengths, dtype=np.float64)
    per_layer = 2 * (4 * hidden * hidden + 2 * hidden * intermediate) * lengths.sum() + 4 * hidden * (lengths ** 2).sum()
    return float(layers * per_layer)


def shapes(model_dir: Path) -> dict:
    config = json.loads((model_dir / "config.json").read_text())
    return dict(layers=config["num_hidden_layers"], hidden=config["hidden_size"],
                intermediate=config["intermediate_size"])


def samples(work: Path, model_dir: Path, seed: int) -> dict[str, list[str]]:
    from support.synthetic import write_dataset
    from vipune_eval.filter import run_rows
    import pyarrow.parquet as pq

    data = work / "m40.json"
    if not data.exists():
        say(f"generating {data} (an M-shaped file at 40 instances)")
        write_dataset(data, **DATA_ARGS)
    out = {}
    for g, n in SAMPLE.items():
        texts = work / f"{g}-texts.parquet"
        if not texts.exists():
            say(f"filter-rows {g}")
            run_rows(data, "seed", g, work / f"{g}-rows.parquet", texts, tokenizer=model_dir / "tokenizer.json")
        column = pq.read_table(texts).column("text").to_pylist()
        column = [t for t in column if t]
        out[g] = random.Random(seed).sample(column, min(n, len(column)))
    return out


def run_padded(model, texts, lengths, batch: int = 4):
    import numpy as np
    order = np.argsort(lengths, kind="stable")
    vectors = np.stack(list(model.embed([texts[i] for i in order], batch_size=batch)))
    out = np.empty_like(vectors)
    out[order] = vectors
    return out


def run_budget(model, texts, lengths, budget: int):
    import numpy as np
    from vipune_eval.embed import embed_batched
    from vipune_eval.io import Progress

    out = np.zeros((len(texts), 384), dtype=np.float32)

    def flush(rows, vectors):
        out[rows] = vectors

    embed_batched(model, texts, lengths, budget, Progress("bench", len(texts), every=1e9), flush)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", type=Path, default=MINILM)
    parser.add_argument("--file", default="model.onnx")
    parser.add_argument("--threads", default="1,2", help="thread counts of the sweep")
    parser.add_argument("--budgets", default="1024,2048,4096,8192", help="token budgets of the sweep")
    parser.add_argument("--granularities", default="session,turn,chunk")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    from vipune_eval.embed import load_model
    from vipune_eval.tokens import count_tokens

    work = OUT / "embed-flops"
    work.mkdir(parents=True, exist_ok=True)
    texts = {g: t for g, t in samples(work, a.model_dir, a.seed).items() if g in a.granularities.split(",")}
    lengths = {g: np.minimum(count_tokens(a.model_dir, t), 512) for g, t in texts.items()}
    shape = shapes(a.model_dir)
    threads = [int(t) for t in a.threads.split(",")]
    budgets = [int(b) for b in a.budgets.split(",")]
    peak = {t: matmul_gflops(t) for t in threads}
    say(f"matmul float32 2048² peak: " + ", ".join(f"{t} thread(s) {g:.0f} GFLOP/s" for t, g in peak.items()))
    results = []
    checks = {}
    for t in threads:
        model = load_model(a.model_dir, a.file, "mean", threads=t)
        for g, sample in texts.items():
            useful = flops(lengths[g], **shape)
            settings = [("padded", None)] + [(f"budget {b}", b) for b in budgets]
            best = {name: float("inf") for name, _ in settings}
            vectors = {}
            for _ in range(a.repeats):  # interleaved: the machine's load hits every setting alike
                for name, budget in settings:
                    start = time.perf_counter()
                    v = run_padded(model, sample, lengths[g]) if budget is None else run_budget(model, sample, lengths[g], budget)
                    best[name] = min(best[name], time.perf_counter() - start)
                    vectors[name] = v
            alone = np.stack([next(iter(model.embed([s], batch_size=1))) for s in sample[:4]])
            checks[f"{g}/{t}"] = {
                "budget_vs_alone_bit_equal": all(np.array_equal(vectors[f"budget {b}"][:4], alone) for b in budgets),
                "budget_vs_padded_max_abs": float(max(np.abs(vectors[f"budget {b}"] - vectors["padded"]).max() for b in budgets)),
            }
            for name, seconds in best.items():
                results.append({"granularity": g, "threads": t, "setting": name, "texts": len(sample),
                                "mean_tokens": float(lengths[g].mean()), "seconds": seconds,
                                "texts_per_s": len(sample) / seconds, "useful_gflops": useful / seconds / 1e9})
            say(f"{g:8s} {t} thread(s), {len(sample)} texts, mean {lengths[g].mean():.0f} tokens: " + ", ".join(
                f"{name} {useful / s / 1e9:.0f} GFLOP/s" for name, s in best.items()))
    peak = {t: max(g, matmul_gflops(t)) for t, g in peak.items()}  # the best seen before or after
    for r in results:
        r["fraction_of_matmul_peak"] = r["useful_gflops"] / peak[r["threads"]]
    say("\ngranularity threads setting        texts/s  useful GFLOP/s  / matmul peak")
    for r in results:
        say(f"{r['granularity']:11s} {r['threads']:7d} {r['setting']:13s} {r['texts_per_s']:8.2f} "
            f"{r['useful_gflops']:15.1f} {r['fraction_of_matmul_peak']:14.2f}")
    say("vector checks: " + json.dumps(checks))
    top = max(threads)
    projection = {}
    for g in texts:
        rows = [r for r in results if r["granularity"] == g and r["threads"] == top and r["setting"] != "padded"]
        best_row = max(rows, key=lambda r: r["useful_gflops"])
        padded = next(r for r in results if r["granularity"] == g and r["threads"] == top and r["setting"] == "padded")
        per_text = flops(lengths[g], **BGE_SMALL) / len(lengths[g])
        seconds = per_text * M_UNIQUE_TEXTS[g] / (best_row["useful_gflops"] * 1e9)
        projection[g] = {"setting": best_row["setting"], "threads": top,
                         "bge_small_minutes": seconds / 60,
                         "bge_small_minutes_padded": per_text * M_UNIQUE_TEXTS[g] / (padded["useful_gflops"] * 1e9) / 60,
                         "fraction_of_matmul_peak": best_row["fraction_of_matmul_peak"],
                         "padded_fraction_of_matmul_peak": padded["fraction_of_matmul_peak"]}
        say(f"projected bge-small on LongMemEval_M, {g} rows, {top} threads: {seconds / 60:.0f} min "
            f"({best_row['setting']}; padded batches of 4: {projection[g]['bge_small_minutes_padded']:.0f} min)")
    (OUT / "embed-flops.json").write_text(json.dumps({
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "model_dir": str(a.model_dir), "shape": shape,
        "matmul_peak_gflops": peak, "load_average": os.getloadavg(), "results": results,
        "checks": checks, "projection_bge_small_M": projection}, indent=2) + "\n")
    say(f"-> {OUT / 'embed-flops.json'}")


if __name__ == "__main__":
    main()
