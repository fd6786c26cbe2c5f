#!/usr/bin/env python3
"""What a what-if grid adds over the shared arms (issue 22), measured side by side.

    python benchmarks/bench_whatif.py                 # 94 pairs x 100 sessions (a few minutes)
    python benchmarks/bench_whatif.py --scale m       # 470 pairs x 500 sessions (LongMemEval_M's shape)
    python benchmarks/bench_whatif.py --pairs 200 --sessions 300 --variants 24 --workers 2

A synthetic LongMemEval file is generated (tests/support/synthetic.py) and filtered with the
real CLI; its vectors are random (the search stages do not care what they mean, and embedding
is not what is measured). Then, as the workflow's jobs do, each a `vipune-eval` process run
``--workers`` at a time (2 = this machine's cores):

- arms: `search-reference --arms-out` per search shard (dense, bm25 AND, bm25 OR of every persona,
  computed once — what any reference run needs anyway);
- grid: for each of the hybrid variants (k x query x pool, 24 by default) `fuse-reference`
  (every shard's run from the arms) and `score` (its metrics, per pair and per split);
- then the report's what-if analysis (selection on dev, randomisation tests and Holm on test).

It prints the seconds of each and the ratio grid / arms. Snakemake's own per-job overhead is
not included (see benchmarks/run.py dag for that). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
OUT = REPO / "benchmarks" / "out" / "whatif"
SCALES = {"small": dict(pairs=94, sessions=100), "m": dict(pairs=470, sessions=500)}
GRID = {"k": [10, 25, 40, 60], "query": ["and", "or"], "pool": [None, 50, 200]}  # 4 x 2 x 3 = 24


def cli(*args: object) -> list[str]:
    return [str(Path(sys.executable).parent / "vipune-eval"), *map(str, args)]


def run_all(commands: list[list[str]], workers: int) -> tuple[float, float]:
    """Run the commands ``workers`` at a time; (wall seconds, CPU seconds of the processes)."""
    def one(cmd: list[str]) -> None:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"{cmd} failed:\n{proc.stderr[-2000:]}")

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, commands))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - start, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def prepare(work: Path, pairs: int, sessions: int, seed: int) -> Path:
    """A filtered view (pairs, qrels, rows, texts) and random embeddings; reused when present."""
    view = work / f"p{pairs}-s{sessions}-seed{seed}"
    if (view / "embeddings.parquet").exists():
        return view
    view.mkdir(parents=True, exist_ok=True)
    abstention = max(1, round(pairs * 30 / 470))
    data = view / "data.json"
    subprocess.run(list(map(str, [sys.executable, REPO / "tests/support/synthetic.py", data,
                                  "--instances", pairs + abstention, "--abstention", abstention,
                                  "--sessions", sessions, "--filler-pool", max(40, sessions * 40),
                                  "--turns", 6, "--words-per-turn", 30, "--seed", seed])),
                   check=True, capture_output=True)
    subprocess.run(cli("filter", "--dataset", data, "--pairs-out", view / "pairs.parquet", "--qrels-out",
                       view / "qrels.txt", "--summary-out", view / "summary.json"), check=True)
    subprocess.run(cli("filter-rows", "--dataset", data, "--rows-out", view / "rows.parquet",
                       "--texts-out", view / "texts.parquet"), check=True)
    ids = pq.read_table(view / "texts.parquet", columns=["text_id"]).column("text_id")
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(len(ids), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    pq.write_table(pa.table({
        "text_id": ids, "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 384),
        "tokens": pa.array(np.full(len(ids), 100, np.int32)), "truncated": pa.array(np.zeros(len(ids), bool))}),
        view / "embeddings.parquet")
    return view


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", choices=list(SCALES), default="small")
    p.add_argument("--pairs", type=int, help="overrides the scale's pairs")
    p.add_argument("--sessions", type=int, help="overrides the scale's sessions per haystack")
    p.add_argument("--variants", type=int, default=24, help="the first N points of the grid (at most 24)")
    p.add_argument("--shards", type=int, default=8, help="search shards (the workflow's default 8)")
    p.add_argument("--workers", type=int, default=2, help="jobs at once (the cores)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    pairs = a.pairs or SCALES[a.scale]["pairs"]
    sessions = a.sessions or SCALES[a.scale]["sessions"]

    from vipune_eval import whatif
    from vipune_eval.measures import SEED, keys
    from vipune_eval.retrievers import resolve
    from vipune_eval.whatif_grid import resolve as grid

    print(f"preparing {pairs} pairs x {sessions} sessions ...", flush=True)
    view = prepare(OUT, pairs, sessions, a.seed)
    run_dir = view / f"runs-{time.strftime('%H%M%S')}"
    run_dir.mkdir()
    search = ["--rows", view / "rows.parquet", "--texts", view / "texts.parquet",
              "--embeddings", view / "embeddings.parquet", "--limit", 10, "--depth", 10]
    arms = [run_dir / f"arms-{i}.parquet" for i in range(a.shards)]
    arms_s, arms_cpu = run_all([cli("search-reference", *search, "--shard", i, "--shards", a.shards, "--arms-out", arms[i])
                      for i in range(a.shards)], a.workers)
    print(f"arms: {arms_s:.1f} s wall, {arms_cpu:.1f} s CPU ({a.shards} shards, {a.workers} at a time)",
          flush=True)

    lab = grid({"base": "hybrid", "grid": GRID}, resolve(["hybrid"]), keys([1, 5, 10], SEED))
    variants = list(lab.variants)[: a.variants]
    specs = [v.canonical() for v in variants]
    fuse = [cli("fuse-reference", "--arms", *arms, "--retriever", spec, "--limit", 10, "--depth", 10,
                "--outputs", *[run_dir / v.name / f"shard-{i}.run" for i in range(a.shards)])
            for v, spec in zip(variants, specs)]
    score = [cli("score", "--qrels", view / "qrels.txt", "--pairs", view / "pairs.parquet",
                 "--runs", *[run_dir / v.name / f"shard-{i}.run" for i in range(a.shards)],
                 "--ks", 1, 5, 10, "--measures", *SEED, "--name", v.name,
                 "--run-out", run_dir / f"{v.name}.run", "--metrics-out", run_dir / f"{v.name}.json")
             for v in variants]
    fuse_s, fuse_cpu = run_all(fuse, a.workers)
    score_s, score_cpu = run_all(score, a.workers)
    start, cpu = time.perf_counter(), time.process_time()
    runs = [{"name": v.name, "params": v.params, "run": "", "per_query":
             json.loads((run_dir / f"{v.name}.json").read_text())["per_query"]} for v in variants]
    block = whatif.analyse("recall_any@5", "dev", {**runs[0], "name": "hybrid"}, runs)
    analyse_s, analyse_cpu = time.perf_counter() - start, time.process_time() - cpu
    grid_s = fuse_s + score_s + analyse_s
    grid_cpu = fuse_cpu + score_cpu + analyse_cpu
    result = {"pairs": pairs, "sessions": sessions, "shards": a.shards, "workers": a.workers,
              "variants": len(variants), "arms_s": round(arms_s, 2), "fuse_s": round(fuse_s, 2),
              "score_s": round(score_s, 2), "analyse_s": round(analyse_s, 2), "grid_s": round(grid_s, 2),
              "grid_over_arms": round(grid_s / arms_s, 3), "per_variant_s": round(grid_s / len(variants), 2),
              "cpu_s": {"arms": round(arms_cpu, 2), "fuse": round(fuse_cpu, 2), "score": round(score_cpu, 2),
                        "analyse": round(analyse_cpu, 2), "grid": round(grid_cpu, 2)},
              "grid_over_arms_cpu": round(grid_cpu / arms_cpu, 3),
              "chosen": block["chosen"], "cpus": os.cpu_count(),
              "load": [round(x, 2) for x in os.getloadavg()]}
    print(f"grid of {len(variants)} variants: fuse {fuse_s:.1f} s + score {score_s:.1f} s + "
          f"analysis {analyse_s:.1f} s = {grid_s:.1f} s ({grid_s / len(variants):.2f} s per variant)")
    print(f"CPU seconds: arms {arms_cpu:.1f}, grid {grid_cpu:.1f} (fuse {fuse_cpu:.1f}, score {score_cpu:.1f}, "
          f"analysis {analyse_cpu:.1f}); on {a.workers} idle cores the grid would take about "
          f"{grid_cpu / a.workers:.0f} s")
    print(f"ratio grid / arms: {grid_s / arms_s:.2f} wall, {grid_cpu / arms_cpu:.2f} CPU")
    (OUT / f"result-p{pairs}-s{sessions}.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
