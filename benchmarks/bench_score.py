"""score: `vipune-eval score` next to a bare ir-measures pass over the same run and qrels.

The run is the dense reference retriever's over the generated search view (made untimed first).
The harness computes the seed protocol's measures at k 1/5/10 with per-category splits and
confidence intervals and writes metrics JSON; the bare process reads the TREC files and asks
ir-measures for the same trec_eval measures (R@k, Success@k, nDCG@k, RR) overall only.
"""

from __future__ import annotations

from benchmarks.common import PYTHON, Figures, cli, interleaved, mean, run_child

KS = [1, 5, 10]
SEED_MEASURES = ["recall", "recall_any", "recall_all", "ndcg", "mrr"]  # vipune_eval.measures.SEED

BARE_SCORE = r"""
import json, sys
import ir_measures
from ir_measures import R, Success, nDCG, RR
qrels = list(ir_measures.read_trec_qrels(sys.argv[1]))
run = list(ir_measures.read_trec_run(sys.argv[2]))
ks = [int(k) for k in sys.argv[3:]]
measures = [m @ k for k in ks for m in (R, Success, nDCG)] + [RR]
print(json.dumps({str(m): v for m, v in ir_measures.calc_aggregate(measures, qrels, run).items()}))
"""


def bench_score(benchmark, work, search_view):
    from vipune_eval.registry import measures

    assert tuple(SEED_MEASURES) == measures.SEED, "the seed protocol's measures changed"
    v = search_view
    dest = work / "score"
    run = dest / "dense.run"
    arms = dest / "arms.parquet"
    run_child(
        cli(
            "search-arms",
            rows=v["rows"],
            texts=v["texts"],
            embeddings=[v["embeddings"]],
            shard=0,
            shards=1,
            limit=10,
            depth=10,
            arms_out=arms,
        ),
        dest / "search.log",
    )
    run_child(
        cli("fuse-reference", arms=[arms], retriever="dense", limit=10, depth=10, outputs=[run]), dest / "fuse.log"
    )
    harness = lambda rep: run_child(
        cli(
            "score",
            qrels=v["qrels"],
            pairs=v["pairs"],
            runs=[run],
            ks=KS,
            measure_names=SEED_MEASURES,
            name="dense",
            run_out=dest / f"rep{rep}" / "dense.run",
            metrics_out=dest / f"rep{rep}" / "metrics.json",
        ),
        dest / f"harness-{rep}.log",
    )
    bare = lambda rep: run_child([PYTHON, "-c", BARE_SCORE, v["qrels"], run, *KS], dest / f"bare-{rep}.log")
    runs = interleaved(benchmark, {"harness": harness, "bare": bare})

    fig = Figures(
        "score: one run (dense reference) of the search view, seed measures, k 1/5/10",
        ["", "wall s (mean)", "CPU s", "peak RSS MiB"],
    )
    for name, label in (("harness", "vipune-eval score"), ("bare", "bare ir-measures pass")):
        rs = runs[name]
        fig.row(label, mean([r.wall_s for r in rs]), mean([r.cpu_s for r in rs]), max(r.peak_rss_mib for r in rs))
    fig.ratio(
        "harness / bare (wall)", mean([r.wall_s for r in runs["harness"]]), mean([r.wall_s for r in runs["bare"]])
    )
    fig.ratio("harness / bare (CPU)", mean([r.cpu_s for r in runs["harness"]]), mean([r.cpu_s for r in runs["bare"]]))
    fig.record(benchmark)
