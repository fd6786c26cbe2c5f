"""search, the binary lane: `vipune-eval search-vipune` next to the same binary calls made directly.

One shard of personas of a generated session view, the fake vipune (tests/support/fake_vipune.py). The
bare pass makes exactly the calls the vipune-lane makes per persona (`import`, then `search --hybrid`
and `search --no-hybrid`), with the import JSONL prepared beforehand (untimed); the harness
pass is the whole `search-vipune` process (start-up, fingerprint check, persona loading, JSONL
building, parsing, run files). The fake is Python, so absolute times are the fake's: the
harness's overhead per persona is what carries over to the Rust binary.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pyarrow.parquet as pq

from benchmarks.common import Figures, cli, import_files, interleaved, mean, run_child, sized

SHARDS = {"small": 10, "M": 24}  # shard 0 of this many: 6 personas (small), 20 (M)
LIMIT = DEPTH = 10


def bench_search_vipune(benchmark, work, search_view, fake_vipune, vipune_home, vipune_fingerprint):
    from vipune_eval.core.persona import personas_of_shard
    from vipune_eval.vipune.client import isolated_env

    v = search_view
    shards = sized(SHARDS)
    dest = work / "search-vipune"
    personas = list(personas_of_shard(v["rows"], v["texts"], [v["embeddings"]], 0, shards))
    jobs = import_files(personas, dest / "bare")  # prepared beforehand, not timed
    env = isolated_env(dest / "bare" / "home", vipune_home.resolve())

    def call(argv: list) -> str:
        proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"exit {proc.returncode}: {argv}\n{proc.stderr[-2000:]}")
        return proc.stdout

    def bare(rep: int) -> dict:
        start = time.perf_counter()
        for folder, p in jobs:
            db = folder / "memories.db"
            db.unlink(missing_ok=True)
            out = call([fake_vipune, "--db-path", db, "--json", "import", folder / "import.jsonl"])
            assert json.loads(out)["inserted"] == len(p.row_ids), out
            for arm in ("--hybrid", "--no-hybrid"):  # the vipune-lane's two searches (vipune, vipune-semantic)
                call(
                    [
                        fake_vipune,
                        "--db-path",
                        db,
                        f"--project={p.question_id}",
                        "--json",
                        "search",
                        arm,
                        "--recency",
                        0,
                        "--limit",
                        LIMIT,
                        "--no-touch",
                        "--",
                        p.question,
                    ]
                )
        return {"wall_s": time.perf_counter() - start}

    def harness(rep: int, shard: int = 0, shards: int = shards, name: str = "harness"):
        cache = dest / "cache"  # finished personas are cached: every pass starts empty
        shutil.rmtree(cache, ignore_errors=True)
        r = dest / f"{name}-{rep}"
        return run_child(
            cli(
                "search-vipune",
                rows=v["rows"],
                texts=v["texts"],
                embeddings=[v["embeddings"]],
                shard=shard,
                shards=shards,
                limit=LIMIT,
                depth=DEPTH,
                binary=fake_vipune,
                fingerprint=vipune_fingerprint,
                hf_home=vipune_home,
                threads=1,
                timeout=300,
                tmp=r / "tmp",
                on_error="stop",
                cache=cache,
                out=r / "vipune.run",
                semantic_out=r / "semantic.run",
                status_out=r / "status.json",
            ),
            dest / f"{name}-{rep}.log",
        )

    # an empty shard (shard k of k + 1 for k pairs): the job's fixed start-up alone
    pairs = pq.read_metadata(v["rows"]).num_rows
    empty = lambda rep: harness(rep, pairs, pairs + 1, "empty")
    runs = interleaved(benchmark, {"harness": harness, "bare": bare, "empty": empty})
    n = len(personas)
    hw = mean([r.wall_s for r in runs["harness"]])
    bw = mean([r["wall_s"] for r in runs["bare"]])
    ew = mean([r.wall_s for r in runs["empty"]])
    fig = Figures(
        f"search-vipune: shard 0 of {shards} = {n} personas, fake vipune, threads 1",
        ["", f"wall s (mean, {n} personas)", "ms / persona"],
    )
    fig.row("vipune-eval search-vipune (process)", hw, 1000 * hw / n)
    fig.row("bare import + 2 search calls", bw, 1000 * bw / n)
    fig.row("harness overhead", hw - bw, 1000 * (hw - bw) / n)
    fig.row("  of which a job's start-up (empty shard)", ew, 1000 * ew / n)
    fig.row("  of which per persona", hw - bw - ew, 1000 * (hw - bw - ew) / n)
    fig.ratio("harness / bare calls (wall)", hw, bw)
    fig.ratio("harness without start-up / bare calls (wall)", hw - ew, bw)
    fig.record(benchmark)
