"""device: embedding on each provider this machine has (the CPU; CUDA where onnxruntime-gpu and a
GPU are present), as the embed job batches there. One command on a GPU machine:

    pip uninstall -y onnxruntime && pip install -e '.[gpu,bench]'   # onnxruntime-gpu in its place
    pytest benchmarks/bench_device.py                               # VIPUNE_BENCH_MODEL=... for another model

Without a GPU it runs the CPU side only (a reduced sample) and says so. Each provider runs in a
process of its own (``device_child.py``), once per rep, providers interleaved. It prints:

- **CPU against CUDA vectors** (same texts, each provider's auto budget): max |difference|, lowest
  cosine; with ``NVIDIA_TF32_OVERRIDE=0`` too (onnxruntime's CUDA provider uses TF32 by default);
- **batch invariance**: with the CPU's batching (a short last batch) the smallest against the
  largest budget and one text alone against in a batch — the figures that showed the CUDA bits
  depend on the batch's shape; with the embed job's batching (fixed shapes on CUDA) all texts in
  one claim against three random claims, session and turn texts; the probe (``rows_alike``) per
  budget; two runs (reps) against each other, bit for bit;
- **throughput per budget**: texts/s and useful TFLOP/s (unpadded tokens x the model's layer
  shapes; the copies filling a fixed-shape batch not counted), and the fillers' share;
- **the projection for LongMemEval_M**: bge-small minutes per granularity at each budget, the
  fixed shapes' fillers for M's texts estimated from the samples' length histograms at
  ``embed.shards: 4`` (session, turn; chunk with the turn texts' histogram is not estimated);
- **the Memcpy nodes** (CUDA): which tensor onnxruntime copies between CPU and GPU, from which
  node to which, the nodes it runs on the CPU (its profile), and the Memcpy nodes' share of the
  node time; its verbose log (the node placements) is in the child's ``.err``.

Figures the earlier GPU session measured by hand (2026-12-04, one H200, onnxruntime-gpu 1.31.1,
a bge-small-shaped model, 4,000 ~500-token texts; PITFALLS.md): CPU vs CUDA max |diff| 4.3e-5;
budgets 512 vs 65536 bit-equal for 115 of 200 texts, alone vs in a batch 48 of 50; 211 texts/s at
512, 641 at 4096, 757 at 16384 (14.0 useful TFLOP/s), 711 at 65536; M session rows 0.65 min.
"""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import ENCODERS, PYTHON, Figures, generate, interleaved, run_child, sized
from vipune_eval.stages.embed.projection import BGE_SMALL, LONGMEMEVAL_M, workload_flops
from vipune_eval.stages.embed.provider import batch_rows
from vipune_eval.stages.embed.tally import encoder_shape

# Per provider: the sample sizes and budgets. A GPU needs thousands of texts to show its rate.
SIZES = {
    "small": {
        "cpu": dict(session=12, turn=48, budgets=[512, 2048], invariance=12, threads=2),
        "cuda": dict(session=2000, turn=3000, budgets=[512, 4096, 8192, 16384, 65536], invariance=200, threads=2),
    },
    "M": {
        "cpu": dict(session=64, turn=256, budgets=[512, 1024, 2048, 4096], invariance=64, threads=2),
        "cuda": dict(session=4000, turn=6000, budgets=[512, 4096, 8192, 16384, 65536], invariance=200, threads=2),
    },
}
DATA = dict(
    instances=12,
    abstention=0,
    sessions_per_haystack=200,
    filler_pool=2400,
    turns_per_session=12,
    words_per_turn=150,
    seed=11,
)
SHARDS = 4  # embed.shards: each job fills its own last batch of every length


def cuda_here() -> tuple[bool, str]:
    import onnxruntime

    from vipune_eval.errors import EvalError
    from vipune_eval.stages.embed.provider import cuda_device_name

    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        return False, f"onnxruntime {onnxruntime.__version__} has no CUDA provider (the CPU build)"
    try:
        return True, cuda_device_name()
    except EvalError as exc:
        return False, exc.message


def work_flops(lengths: np.ndarray, budget: int, shape: dict, fixed: bool, jobs: int = 1) -> tuple[float, float]:
    """(useful, computed) FLOPs of embedding texts of ``lengths`` split evenly over ``jobs`` jobs, each
    batching as the embed job does (with ``fixed``: every call of a length has batch_rows rows)."""
    useful = workload_flops(shape, float(lengths.sum()), float((lengths.astype(np.float64) ** 2).sum()))
    if not fixed:
        return useful, useful
    computed = 0.0
    values, counts = np.unique(lengths, return_counts=True)
    for length, count in zip(values.tolist(), counts.tolist()):
        rows = batch_rows(length, budget)
        computed += jobs * rows * math.ceil(count / jobs / rows) * workload_flops(shape, length, length * length)
    return useful, computed


def m_lengths(sample: np.ndarray, texts: int) -> np.ndarray:
    """``texts`` lengths in the sample's proportions: a stand-in for M's histogram."""
    values, counts = np.unique(sample, return_counts=True)
    return np.repeat(values, np.round(counts / counts.sum() * texts).astype(int))


def bench_device(benchmark, work, embed_model):
    from benchmarks.common import filter_view
    from vipune_eval.core.tokens import count_tokens

    has_cuda, device = cuda_here()
    sizes = sized(SIZES)
    providers = ["cpu", "cuda"] if has_cuda else ["cpu"]
    dest = work / "device"
    data = generate(DATA)
    samples = {}
    for granularity in ("session", "turn"):
        filter_view(data, dest / granularity, granularity)
        texts = [t for t in pq.read_table(dest / granularity / "texts.parquet").column("text").to_pylist() if t]
        n = max(sizes[p][granularity] for p in providers)
        texts = random.Random(0).sample(texts, min(n, len(texts)))
        lengths = np.minimum(count_tokens(embed_model.dir, texts), 512)
        for p in providers:
            k = sizes[p][granularity]
            path = dest / f"{p}-{granularity}.parquet"
            pq.write_table(pa.table({"text": texts[:k], "tokens": pa.array(lengths[:k], pa.int64())}), path)
            samples[(p, granularity)] = (path, lengths[:k])
    shape = encoder_shape(embed_model.dir)
    bert = shape is not None
    shape = shape or ENCODERS["MiniLM-L6"]

    def side(provider: str, env: dict | None = None, tag: str = ""):
        def run(rep: int) -> dict:
            spec = {
                "provider": provider,
                "dest": str(dest / f"{provider}{tag}-{rep}"),
                "model_dir": str(embed_model.dir),
                "file": embed_model.file,
                "pooling": embed_model.pooling,
                "threads": sizes[provider]["threads"],
                "session": str(samples[(provider, "session")][0]),
                "turn": str(samples[(provider, "turn")][0]),
                "budgets": sizes[provider]["budgets"],
                "invariance_texts": sizes[provider]["invariance"],
                "profile_calls": 20,
            }
            from benchmarks.common import child_env

            return run_child(
                [PYTHON, "-m", "benchmarks.device_child", json.dumps(spec)],
                dest / f"{provider}{tag}-{rep}.log",
                child_env(**(env or {})),
            ).json()

        return run

    sides = {p: side(p) for p in providers}
    if has_cuda:
        sides["cuda, TF32 off"] = side("cuda", {"NVIDIA_TF32_OVERRIDE": "0"}, "-notf32")
    runs = interleaved(benchmark, sides)

    fig = Figures(
        f"device: {embed_model.name} on {', '.join(providers)}"
        + (f" ({device})" if has_cuda else f" (no GPU: {device})"),
        [
            "provider",
            "budget",
            "texts",
            "mean tokens",
            "texts/s",
            "useful TFLOP/s",
            "filler share",
            "rows alike (probe)",
        ]
        + [f"M {g} min" for g in LONGMEMEVAL_M],
    )
    m_hist = {
        g: m_lengths(samples[(providers[-1], "turn" if g != "session" else "session")][1], LONGMEMEVAL_M[g]["texts"])
        for g in LONGMEMEVAL_M
    }
    for name, rs in runs.items():
        provider = "cuda" if name.startswith("cuda") else "cpu"
        fixed = provider == "cuda"
        lengths = samples[(provider, "session")][1]
        for budget in sizes[provider]["budgets"]:
            best = min(r["budgets"][str(budget)]["seconds"] for r in rs)
            b = rs[0]["budgets"][str(budget)]
            useful, computed = work_flops(lengths, budget, shape, fixed)
            per_s = computed / best  # FLOP/s the provider computes, fillers included
            minutes = []
            for g, w in LONGMEMEVAL_M.items():
                m_useful, m_computed = work_flops(m_hist[g], budget, BGE_SMALL, fixed, SHARDS)
                scale = workload_flops(BGE_SMALL, w["tokens"], w["squares"]) / m_useful  # M's own sums
                minutes.append(m_computed * scale / per_s / 60 if g != "chunk" or not fixed else float("nan"))
            fig.row(
                name,
                budget,
                b["texts"],
                float(lengths.mean()),
                b["texts"] / best,
                useful / best / 1e12,
                b["filler_tokens"] / max(b["tokens"] + b["filler_tokens"], 1),
                {True: "yes", False: "NO", None: "-"}[b["rows_alike"]],
                *minutes,
            )
        v = rs[0]["variable_shapes"]
        fig.note(
            f"{name}, the CPU's batching (short last batch): budgets {v['budgets'][0]} vs {v['budgets'][1]} "
            f"bit-equal for {v['low_vs_high']['equal']} of {v['low_vs_high']['of']} texts (max |diff| "
            f"{v['low_vs_high']['max_abs']:.1e}); alone vs in a batch {v['alone_vs_batch']['equal']} of "
            f"{v['alone_vs_batch']['of']}"
        )
        for g, c in rs[0]["claims"].items():
            fig.note(
                f"{name}, the embed job's batching ({'fixed shapes' if fixed else 'short last batch'}, budget "
                f"{c['budget']}), {g} texts, one claim vs three random claims: bit-equal {c['equal']} of {c['of']}"
                f" (max |diff| {c['max_abs']:.1e})"
            )
        if len(rs) > 1:
            a, b = (
                np.load(dest / f"{name.split(',')[0]}{'-notf32' if 'TF32' in name else ''}-{i}" / "vectors.npy")
                for i in (0, 1)
            )
            fig.note(
                f"{name}, two runs (processes), auto budget: bit-equal {sum(np.array_equal(x, y) for x, y in zip(a, b))}"
                f" of {len(a)}"
            )
        if "placement" in rs[0]:
            p = rs[0]["placement"]
            copies = (
                "; ".join(f"{m['op']} of {m['tensor']} from {m['from']} to {', '.join(m['to'])}" for m in p["memcpy"])
                or "none"
            )
            fig.note(f"{name}: Memcpy nodes: {copies}")
            fig.note(
                f"{name}: nodes on the CPU: {', '.join(p['cpu_nodes']) or 'none'}; Memcpy share of node time "
                f"{p['memcpy_share']:.2%} (batches {p['shape'][0]} x {p['shape'][1]}, {p['calls']} calls); "
                f"by provider {', '.join(f'{k} {v:.1%}' for k, v in p['share_by_provider'].items())}"
            )
    if has_cuda:
        n = min(sizes["cpu"]["session"], sizes["cuda"]["session"])
        cpu_vectors = np.load(dest / "cpu-0" / "vectors.npy")[:n]
        for name, tag in (("cuda", ""), ("cuda, TF32 off", "-notf32")):
            gpu_vectors = np.load(dest / f"cuda{tag}-0" / "vectors.npy")[:n]
            cosine = (cpu_vectors * gpu_vectors).sum(axis=1) / (
                np.linalg.norm(cpu_vectors, axis=1) * np.linalg.norm(gpu_vectors, axis=1)
            )
            fig.note(
                f"CPU vs {name} vectors ({n} texts, auto budgets): max |diff| "
                f"{np.abs(cpu_vectors - gpu_vectors).max():.1e}, lowest cosine {cosine.min():.8f}"
            )
        best = {p: max(b["texts"] / b["seconds"] for r in runs[p] for b in r["budgets"].values()) for p in providers}
        fig.ratio(
            f"cuda / cpu ({sizes['cpu']['threads']} threads), texts/s at each one's best budget",
            best["cuda"],
            best["cpu"],
        )
    else:
        fig.note(
            f"no CUDA side: {device}; on a GPU machine this prints the same rows for cuda (budgets "
            f"{sizes['cuda']['budgets']}), CPU vs CUDA vectors (TF32 on and off) and the Memcpy nodes"
        )
    fig.note(
        f"M projections: bge-small over LongMemEval_M's texts at each setting's rate (computed FLOP/s, fillers "
        f"included); fixed shapes' fillers for M at embed.shards {SHARDS} from the samples' length histograms "
        "(chunk: not estimated on CUDA)"
    )
    if not bert:
        fig.note(f"{embed_model.name} has no BERT config.json: the FLOP figures assume MiniLM-L6 and mean nothing")
    fig.record(benchmark)
