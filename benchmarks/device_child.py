"""One provider's side of ``bench_device.py``, in a process of its own (one CUDA context, its own
arena): ``python -m benchmarks.device_child SPEC_JSON``; prints one JSON line of figures.

What it measures, through the package's own ``load_model`` / ``embed_batched`` / ``rows_alike``:

- ``budgets``: every budget's model calls over the session sample, batched as the embed job
  batches on this provider (fixed shapes on CUDA): seconds, tokens, filler tokens, the probe;
  the vectors at the provider's auto budget are saved (``vectors.npy``) for the CPU-vs-CUDA and
  run-to-run comparisons the parent makes;
- ``variable_shapes``: the batching of the CPU (a short last batch) at the smallest against the
  largest budget, and the first texts alone against in a batch: how many are bit-equal;
- ``claims``: fixed-shape batches over all texts at once against the same texts in three random
  claims (as three jobs would get them), session and turn samples: how many are bit-equal;
- ``placement`` (CUDA only): the nodes onnxruntime runs on the CPU and the Memcpy nodes it adds
  (the optimized graph it saves, and its verbose log on stderr), and the share of the Memcpy
  nodes in a profiled run.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from vipune_eval.core.io import Progress
from vipune_eval.stages.embed.embed import embed_batched, load_model, rows_alike
from vipune_eval.stages.embed.provider import AUTO_BUDGET
from vipune_eval.stages.embed.tally import Tally


def read_sample(path: str) -> tuple[list[str], np.ndarray]:
    table = pq.read_table(path)
    return table.column("text").to_pylist(), table.column("tokens").to_numpy()


def embed_all(
    model, texts: list[str], lengths: np.ndarray, budget: int, fixed: bool, tally: Tally | None = None
) -> np.ndarray:
    parts: dict[int, np.ndarray] = {}
    embed_batched(
        model,
        texts,
        lengths,
        budget,
        Progress("bench", len(texts), every=1e9),
        lambda rows, vectors: parts.update(zip(rows.tolist(), vectors)),
        tally=tally,
        fixed_shapes=fixed,
    )
    return np.stack([parts[i] for i in range(len(texts))])


def bit_equal(a: np.ndarray, b: np.ndarray) -> dict:
    same = [bool(np.array_equal(x, y)) for x, y in zip(a, b)]
    return {"equal": sum(same), "of": len(same), "max_abs": float(np.abs(a - b).max()) if len(a) else 0.0}


def in_claims(model, texts, lengths, budget, fixed, seed=0, claims=3) -> np.ndarray:
    """The texts embedded as ``claims`` jobs would embed them: a random split, each part alone."""
    owner = np.random.default_rng(seed).integers(0, claims, len(texts))
    out = np.zeros((len(texts), 0), np.float32)
    for c in range(claims):
        rows = np.flatnonzero(owner == c)
        if len(rows):
            vectors = embed_all(model, [texts[i] for i in rows], lengths[rows], budget, fixed)
            if not out.shape[1]:
                out = np.zeros((len(texts), vectors.shape[1]), np.float32)
            out[rows] = vectors
    return out


def placement(model_dir: Path, file: str, dest: Path, text: str, rows: int, calls: int) -> dict:
    """Where onnxruntime puts the graph's nodes under the CUDA provider, and what its Memcpy nodes
    cost: ``calls`` calls of ``rows`` copies of ``text`` (cut at 512 tokens) in a profiled session."""
    import onnx
    import onnxruntime as ort

    from vipune_eval.core.tokens import load_tokenizer
    from vipune_eval.stages.embed.onnx_graph import runnable_folder

    ort.set_default_logger_severity(0)  # verbose: the node placements go to stderr (the child's .err)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.optimized_model_filepath = str(dest / "optimized-cuda.onnx")
    so.enable_profiling = True
    so.profile_file_prefix = str(dest / "profile-cuda")
    with runnable_folder(model_dir, file) as folder:
        session = ort.InferenceSession(
            str(folder / file), so, providers=["CUDAExecutionProvider", "CPUExecutionProvider"]
        )
    ort.set_default_logger_severity(2)
    graph = onnx.load(str(dest / "optimized-cuda.onnx")).graph
    producer = {out: node for node in graph.node for out in node.output}
    memcpy = []
    for node in graph.node:
        if node.op_type.startswith("Memcpy"):
            source = producer.get(node.input[0])
            readers = [f"{n.op_type} {n.name}" for n in graph.node if node.output[0] in n.input]
            memcpy.append(
                {
                    "op": node.op_type,
                    "tensor": node.input[0],
                    "from": f"{source.op_type} {source.name}" if source else "a graph input",
                    "to": readers,
                }
            )
    ids = np.array(load_tokenizer(model_dir / "tokenizer.json").encode(text).ids[:512], np.int64)
    length = len(ids)
    feeds = {
        "input_ids": np.tile(ids, (rows, 1)),
        "attention_mask": np.ones((rows, length), np.int64),
        "token_type_ids": np.zeros((rows, length), np.int64),
    }
    feeds = {k: v for k, v in feeds.items() if k in {i.name for i in session.get_inputs()}}
    for _ in range(calls):
        session.run(None, feeds)
    events = json.loads(Path(session.end_profiling()).read_text())
    kernels = [e for e in events if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")]
    total = sum(e["dur"] for e in kernels) or 1
    by_provider: dict[str, float] = {}
    for e in kernels:
        by_provider[e["args"].get("provider", "?")] = by_provider.get(e["args"].get("provider", "?"), 0) + e["dur"]
    cpu_nodes = sorted(
        {
            f"{e['args'].get('op_name')} {e['name'][: -len('_kernel_time')]}"
            for e in kernels
            if e["args"].get("provider") == "CPUExecutionProvider"
        }
    )
    return {
        "memcpy": memcpy,
        "cpu_nodes": cpu_nodes,
        "shape": [rows, length],
        "calls": calls,
        "memcpy_share": sum(e["dur"] for e in kernels if e["args"].get("op_name", "").startswith("Memcpy")) / total,
        "share_by_provider": {k: v / total for k, v in by_provider.items()},
    }


def main(spec: dict) -> dict:
    cuda = spec["provider"] == "cuda"
    dest = Path(spec["dest"])
    dest.mkdir(parents=True, exist_ok=True)
    model_dir = Path(spec["model_dir"])
    started = time.perf_counter()
    model = load_model(model_dir, spec["file"], spec["pooling"], threads=spec["threads"], cuda=cuda)
    load_s = time.perf_counter() - started
    texts, lengths = read_sample(spec["session"])
    turns, turn_lengths = read_sample(spec["turn"])
    auto = AUTO_BUDGET[spec["provider"]]
    out: dict = {
        "provider": spec["provider"],
        "load_s": load_s,
        "texts": len(texts),
        "mean_tokens": float(lengths.mean()),
        "budgets": {},
    }
    for budget in spec["budgets"]:  # warm up: cuBLAS handles, the arena, every shape of the sample
        embed_all(model, texts[:64], lengths[:64], budget, cuda)
    for budget in spec["budgets"]:
        tally = Tally()
        vectors = embed_all(model, texts, lengths, budget, cuda, tally)
        if budget == auto:
            np.save(dest / "vectors.npy", vectors)
        out["budgets"][budget] = {
            "seconds": tally.seconds,
            "texts": tally.texts,
            "tokens": tally.tokens,
            "squares": tally.squares,
            "filler_tokens": tally.filler_tokens,
            "rows_alike": rows_alike(model, texts, lengths, budget),
        }
    if auto not in spec["budgets"]:
        np.save(dest / "vectors.npy", embed_all(model, texts, lengths, auto, cuda))
    low, high = min(spec["budgets"]), max(spec["budgets"])
    n = min(len(texts), spec["invariance_texts"])
    out["variable_shapes"] = {
        "budgets": [low, high],
        "low_vs_high": bit_equal(
            embed_all(model, texts[:n], lengths[:n], low, False), embed_all(model, texts[:n], lengths[:n], high, False)
        ),
        "alone_vs_batch": bit_equal(
            np.stack([next(iter(model.embed([t], batch_size=1))) for t in texts[:50]]),
            embed_all(model, texts[:50], lengths[:50], high, False),
        ),
    }
    out["claims"] = {}
    for name, (sample, sample_lengths) in {"session": (texts[:n], lengths[:n]), "turn": (turns, turn_lengths)}.items():
        once = embed_all(model, sample, sample_lengths, auto, cuda)
        out["claims"][name] = {"budget": auto, **bit_equal(once, in_claims(model, sample, sample_lengths, auto, cuda))}
    if cuda:
        longest = texts[int(np.argmax(lengths))]
        out["placement"] = placement(
            model_dir, spec["file"], dest, longest, max(1, auto // int(lengths.max())), spec["profile_calls"]
        )
    return out


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
