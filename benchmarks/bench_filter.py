"""filter: streaming the LongMemEval JSON, next to a bare ijson pass over the same file.

`filter` (pairs, qrels, summary) and `filter-rows` (rows, unique texts), each its own process,
against a process that only parses the file with ijson: the ratio is what the filter's Python
work costs over the parse; peak RSS / file size says whether it streams.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from benchmarks.common import PYTHON, Figures, filter_view, generate, interleaved, mean, run_child, sized

# M: LongMemEval_M-like (2.6 GB): 500 instances, 500 sessions of 12 turns x 150 words.
SIZES = {
    "small": dict(
        instances=50,
        abstention=3,
        sessions_per_haystack=200,
        filler_pool=2000,
        turns_per_session=12,
        words_per_turn=150,
        seed=1,
    ),
    "M": dict(
        instances=500,
        abstention=30,
        sessions_per_haystack=500,
        filler_pool=20000,
        turns_per_session=12,
        words_per_turn=150,
        seed=1,
    ),
}

BARE_IJSON = """
import sys, ijson
n = 0
with open(sys.argv[1], "rb") as f:
    for inst in ijson.items(f, "item", use_float=True):
        n += len(inst["haystack_sessions"])
print(n)
"""


def bench_filter(benchmark, work):
    data = generate(sized(SIZES))
    mb = data.stat().st_size / 1e6
    with open(data, "rb") as f:  # every reader sees a warm page cache
        while f.read(1 << 24):
            pass
    dest = work / "filter"
    runs = interleaved(
        benchmark,
        {
            "filter": lambda rep: filter_view(data, dest / f"rep{rep}"),
            "bare": lambda rep: run_child([PYTHON, "-c", BARE_IJSON, data], dest / f"bare-{rep}.log"),
        },
    )
    pairs = [r["filter"] for r in runs["filter"]]
    rows = [r["filter-rows"] for r in runs["filter"]]
    bare = runs["bare"]
    summary = json.loads((dest / "rep0" / "summary.json").read_text())
    unique = pq.read_metadata(dest / "rep0" / "texts.parquet").num_rows

    fig = Figures(
        f"filter: {mb:.0f} MB file, {summary['pairs']} pairs, {summary['session_slots']} session slots",
        ["process", "wall s (mean)", "MB/s", "CPU s", "peak RSS MiB", "RSS / file"],
    )
    for name, rs in (("filter", pairs), ("filter-rows", rows), ("bare ijson pass", bare)):
        wall = mean([r.wall_s for r in rs])
        rss = max(r.peak_rss_mib for r in rs)
        fig.row(name, wall, mb / wall, mean([r.cpu_s for r in rs]), rss, rss * 2**20 / 1e6 / mb)
    both = mean([a.wall_s + b.wall_s for a, b in zip(pairs, rows)])
    fig.ratio("filter + filter-rows / bare ijson (wall)", both, mean([r.wall_s for r in bare]))
    fig.ratio(
        "filter + filter-rows / bare ijson (CPU)",
        mean([a.cpu_s + b.cpu_s for a, b in zip(pairs, rows)]),
        mean([r.cpu_s for r in bare]),
    )
    fig.ratio("filter / bare ijson (wall)", mean([r.wall_s for r in pairs]), mean([r.wall_s for r in bare]))
    fig.ratio("peak RSS (larger stage) / file size", max(r.peak_rss_mib for r in pairs + rows) * 2**20 / 1e6, mb)
    fig.ratio("dedup: session slots / unique texts", summary["session_slots"], unique)
    fig.record(benchmark)
