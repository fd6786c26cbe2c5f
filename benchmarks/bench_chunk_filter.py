"""Chunk rows against session rows: `filter-rows` wall time, side by side (issue 23).

    python benchmarks/bench_chunk_filter.py [--ref adfee55] [--repeats 2]

Standalone. Generates (once) the M-shaped file of bench_embed_flops.py (40 instances x 500
sessions x 12 turns of 150 words) and times, interleaved, `vipune-eval filter-rows` for session
rows and chunk rows with this checkout's package, and chunk rows with the package at git ``--ref``
(the code before, extracted with `git archive`). Prints each best wall time and the ratios; writes
``benchmarks/out/chunk-filter.json``. The tokenizer is the MiniLM stand-in's (same WordPiece
vocabulary as bge-small).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "out"
sys.path.insert(0, str(REPO / "tests"))
TOKENIZER = Path("/work/shared/models/all-MiniLM-L6-v2-onnx/tokenizer.json")
DATA_ARGS = dict(instances=40, abstention=3, sessions_per_haystack=500, filler_pool=3000,
                 turns_per_session=12, words_per_turn=150, seed=1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ref", default="adfee55", help="git ref of the code before")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--tokenizer", type=Path, default=TOKENIZER)
    a = parser.parse_args()
    from support.synthetic import write_dataset

    work = OUT / "embed-flops"
    work.mkdir(parents=True, exist_ok=True)
    data = work / "m40.json"
    if not data.exists():
        write_dataset(data, **DATA_ARGS)
    old = work / f"package-{a.ref}"
    if not old.exists():
        archive = subprocess.run(["git", "-C", str(REPO), "archive", a.ref, "vipune_eval"],
                                 capture_output=True, check=True).stdout
        tarfile.open(fileobj=io.BytesIO(archive)).extractall(old)
    runs = {"session": (REPO, "session"), "chunk": (REPO, "chunk"), f"chunk@{a.ref}": (old, "chunk")}
    best = {name: float("inf") for name in runs}
    for _ in range(a.repeats):
        for name, (root, granularity) in runs.items():
            env = {**os.environ, "PYTHONPATH": str(root)}
            cmd = [sys.executable, "-m", "vipune_eval", "filter-rows", "--granularity", granularity,
                   "--dataset", str(data), "--rows-out", str(work / f"bench-{name}-rows.parquet"),
                   "--texts-out", str(work / f"bench-{name}-texts.parquet"), "--tokenizer", str(a.tokenizer)]
            start = time.perf_counter()
            subprocess.run(cmd, env=env, check=True, capture_output=True)
            best[name] = min(best[name], time.perf_counter() - start)
            print(f"{name:16s} {time.perf_counter() - start:7.1f} s", flush=True)
    import pyarrow.parquet as pq
    same = pq.read_table(work / "bench-chunk-texts.parquet").equals(pq.read_table(work / f"bench-chunk@{a.ref}-texts.parquet"))
    result = {"best_seconds": best, "chunk_over_session": best["chunk"] / best["session"],
              f"chunk@{a.ref}_over_session": best[f"chunk@{a.ref}"] / best["session"],
              "chunk_texts_identical_to_ref": same, "load_average": os.getloadavg()}
    print(json.dumps(result, indent=2))
    (OUT / "chunk-filter.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
