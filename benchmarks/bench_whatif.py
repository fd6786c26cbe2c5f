"""what-if: what a 24-variant hybrid grid adds over the shared arms it fuses from.

A generated session view (6 turns x 30 words), filtered with the real CLI, with random unit
vectors (the search stages do not care what they mean; embedding is not what is measured).
Then, as the workflow's jobs, each a `vipune-eval` process, ``WORKERS`` at a time (this
machine's 2 cores), side by side:

- arms: `search-arms --arms-out` per search shard (dense, bm25 AND, bm25 OR of every
  persona, computed once: what any reference run needs anyway);
- grid: for each hybrid variant (k x query x pool) `fuse-reference` (every shard's run, from the
  arms) and `score` (its metrics, per pair and per split), then the report's what-if analysis
  (selection on dev, randomisation tests and Holm on test) in this process.

The grid reads arms made once before the rounds, so the two sides are independent and
interleave. Snakemake's own per-job overhead is not included (bench_workflow.py measures
planning cost per job).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import Child, Figures, cli, filter_view, generate, interleaved, mean, run_child, sized

# Pairs x sessions per haystack: small = 94 x 100; M = LongMemEval_M's 470 x 500.
SIZES = {"small": dict(pairs=94, sessions=100), "M": dict(pairs=470, sessions=500)}
GRID = {"k": [10, 25, 40, 60], "query": ["and", "or"], "pool": [None, 50, 200]}  # 4 x 2 x 3 = 24
SHARDS, WORKERS, LIMIT, DEPTH, KS = 8, 2, 10, 10, [1, 5, 10]


def view(dest: Path, pairs: int, sessions: int, seed: int = 1) -> Path:
    """A filtered session view (pairs, qrels, rows, texts) with random embeddings."""
    abstention = max(1, round(pairs * 30 / 470))
    data = generate(
        dict(
            instances=pairs + abstention,
            abstention=abstention,
            sessions_per_haystack=sessions,
            filler_pool=max(40, sessions * 40),
            turns_per_session=6,
            words_per_turn=30,
            seed=seed,
        )
    )
    filter_view(data, dest)
    ids = pq.read_table(dest / "texts.parquet", columns=["text_id"]).column("text_id")
    vectors = np.random.default_rng(seed).normal(size=(len(ids), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    pq.write_table(
        pa.table(
            {
                "text_id": ids,
                "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 384),
                "tokens": pa.array(np.full(len(ids), 100, np.int32)),
                "truncated": pa.array(np.zeros(len(ids), bool)),
            }
        ),
        dest / "embeddings.parquet",
    )
    return dest


def run_all(commands: list[tuple[list[str], Path]]) -> tuple[float, float]:
    """Run (command, log) pairs ``WORKERS`` at a time: wall seconds of the lot, CPU seconds of
    the processes."""
    start = time.perf_counter()
    with ThreadPoolExecutor(WORKERS) as pool:
        children: list[Child] = list(pool.map(lambda c: run_child(*c), commands))
    return time.perf_counter() - start, sum(c.cpu_s for c in children)


def bench_whatif(benchmark, work):
    from vipune_eval.plan.whatif_grid import resolve as grid
    from vipune_eval.registry.measures import SEED, keys
    from vipune_eval.registry.retrievers import resolve
    from vipune_eval.stages.report import whatif

    z = sized(SIZES)
    dest = work / "whatif"
    v = view(dest / "view", z["pairs"], z["sessions"])
    search = dict(
        rows=v / "rows.parquet",
        texts=v / "texts.parquet",
        embeddings=[v / "embeddings.parquet"],
        limit=LIMIT,
        depth=DEPTH,
        shards=SHARDS,
    )

    def arms(folder: Path) -> tuple[list[Path], tuple[float, float]]:
        out = [folder / f"arms-{i}.parquet" for i in range(SHARDS)]
        times = run_all(
            [(cli("search-arms", **search, shard=i, arms_out=out[i]), folder / f"arms-{i}.log") for i in range(SHARDS)]
        )
        return out, times

    shared, _ = arms(dest / "arms")  # what the grid fuses from in every round
    lab = grid({"base": "hybrid", "grid": GRID}, resolve(["hybrid"]), keys(KS, SEED))
    variants = list(lab.variants)

    def grid_side(rep: int) -> dict[str, tuple[float, float]]:
        d = dest / f"grid-{rep}"
        shard_runs = {x.name: [d / x.name / f"shard-{i}.run" for i in range(SHARDS)] for x in variants}
        fuse = run_all(
            [
                (
                    cli(
                        "fuse-reference",
                        arms=shared,
                        retriever=x.canonical(),
                        limit=LIMIT,
                        depth=DEPTH,
                        outputs=shard_runs[x.name],
                    ),
                    d / x.name / "fuse.log",
                )
                for x in variants
            ]
        )
        score = run_all(
            [
                (
                    cli(
                        "score",
                        qrels=v / "qrels.txt",
                        pairs=v / "pairs.parquet",
                        runs=shard_runs[x.name],
                        ks=KS,
                        measure_names=list(SEED),
                        name=x.name,
                        run_out=d / f"{x.name}.run",
                        metrics_out=d / f"{x.name}.json",
                    ),
                    d / x.name / "score.log",
                )
                for x in variants
            ]
        )
        start, cpu = time.perf_counter(), time.process_time()
        runs = [
            {
                "name": x.name,
                "params": x.params,
                "run": "",
                "per_query": json.loads((d / f"{x.name}.json").read_text())["per_query"],
            }
            for x in variants
        ]
        block = whatif.analyse("recall_any@5", "dev", {**runs[0], "name": "hybrid"}, runs)
        return {
            "fuse": fuse,
            "score": score,
            "analysis": (time.perf_counter() - start, time.process_time() - cpu),
            "chosen": block["chosen"],
        }

    rounds = interleaved(benchmark, {"arms": lambda rep: arms(dest / f"arms-{rep}")[1], "grid": grid_side})

    def avg(side: str, part: str | None = None) -> tuple[float, float]:
        xs = [r if part is None else r[part] for r in rounds[side]]
        return mean([x[0] for x in xs]), mean([x[1] for x in xs])

    parts = {p: avg("grid", p) for p in ("fuse", "score", "analysis")}
    total = (sum(w for w, _ in parts.values()), sum(c for _, c in parts.values()))
    arms_t = avg("arms")
    fig = Figures(
        f"what-if: {z['pairs']} pairs x {z['sessions']} sessions, {SHARDS} search shards, "
        f"{len(variants)}-variant hybrid grid, jobs {WORKERS} at a time",
        ["", "wall s (mean)", "CPU s"],
    )
    fig.row(f"arms (search-arms --arms-out, {SHARDS} shards)", *arms_t)
    fig.row(f"grid: {len(variants)} x fuse-reference", *parts["fuse"])
    fig.row(f"grid: {len(variants)} x score", *parts["score"])
    fig.row("grid: analysis (selection, randomisation tests + intervals, Holm)", *parts["analysis"])
    fig.row("grid total", *total)
    fig.ratio("grid / arms (wall)", total[0], arms_t[0])
    fig.ratio("grid / arms (CPU)", total[1], arms_t[1])
    fig.note(
        f"per variant: {total[0] / len(variants):.2f} s wall; on {WORKERS} idle cores the grid's CPU "
        f"seconds would take about {total[1] / WORKERS:.0f} s"
    )
    fig.note(f"chosen on dev (recall_any@5): {rounds['grid'][0]['chosen']}")
    fig.record(benchmark)
