"""search, the reference retrievers: `vipune-eval search-arms` next to a bare loop doing the same work.

One process each over every persona of a generated session view: the harness runs its five
reference retrievers (dense, bm25, bm25-or, hybrid, hybrid-or) and writes their run files; the
bare loop reads the same Parquet files whole and, per persona, scans the cosines with numpy,
builds one in-memory SQLite FTS5 index, runs vipune's AND query and an OR query, fuses each
with the dense ranking (RRF k = 25) and writes nothing. The ratio is what the harness adds.
"""

from __future__ import annotations

import pyarrow.parquet as pq

from benchmarks.common import PYTHON, Figures, cli, interleaved, mean, run_child, run_children

RETRIEVERS = ["dense", "bm25", "bm25-or", "hybrid", "hybrid-or"]
LIMIT = DEPTH = 10  # the session view's settings in the workflow

BARE_REFERENCE = r"""
import json, sqlite3, sys
import numpy as np, pyarrow.parquet as pq
rows_p, texts_p, emb_p, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
pool = min(max(10 * limit, 50), 10000)
t = pq.read_table(texts_p)
text = dict(zip(t.column("text_id").to_pylist(), t.column("text").to_pylist()))
e = pq.read_table(emb_p)
at = {tid: i for i, tid in enumerate(e.column("text_id").to_pylist())}
matrix = e.column("embedding").combine_chunks().values.to_numpy().reshape(e.num_rows, -1)
quote = lambda w: '"' + w.replace('"', '""') + '"'

def rrf(a, b):
    score = {}
    for ranking in (a, b):
        for rank, r in enumerate(ranking, 1):
            score[r] = score.get(r, 0.0) + 1 / (25 + rank)
    return sorted(score, key=lambda r: (-score[r], r))[:limit]

n = 0
for pair in pq.read_table(rows_p).to_pylist():
    ids = pair["row_text_ids"]
    scores = matrix[[at[x] for x in ids]].astype(np.float64) @ matrix[at[pair["question_text_id"]]]
    dense = [int(i) for i in np.argsort(-scores, kind="stable")[:pool]]
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(content, tokenize='porter unicode61')")
    db.executemany("INSERT INTO f(rowid, content) VALUES (?, ?)", [(i, text[x]) for i, x in enumerate(ids)])
    words = [quote(w) for w in pair["question"].split()]
    for query in (" ".join(words), " OR ".join(words)):
        bm25 = [r for (r,) in db.execute("SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT ?",
                                         (query, pool))]
        rrf(dense, bm25)
    db.close()
    n += 1
print(json.dumps({"personas": n}))
"""


def bench_search_reference(benchmark, work, search_view):
    v = search_view
    dest = work / "search-arms"
    personas = pq.read_metadata(v["rows"]).num_rows

    def harness(rep: int):
        """What the workflow runs: the shard's arms once, then one fusion per retriever."""
        arms = dest / f"rep{rep}" / "arms.parquet"
        return run_children(
            [
                (
                    cli(
                        "search-arms",
                        rows=v["rows"],
                        texts=v["texts"],
                        embeddings=[v["embeddings"]],
                        shard=0,
                        shards=1,
                        limit=LIMIT,
                        depth=DEPTH,
                        arms_out=arms,
                    ),
                    dest / f"harness-{rep}-arms.log",
                )
            ]
            + [
                (
                    cli(
                        "fuse-reference",
                        arms=[arms],
                        retriever=r,
                        limit=LIMIT,
                        depth=DEPTH,
                        outputs=[dest / f"rep{rep}" / f"{r}.run"],
                    ),
                    dest / f"harness-{rep}-{r}.log",
                )
                for r in RETRIEVERS
            ]
        )

    bare = lambda rep: run_child(
        [PYTHON, "-c", BARE_REFERENCE, v["rows"], v["texts"], v["embeddings"], LIMIT], dest / f"bare-{rep}.log"
    )
    runs = interleaved(benchmark, {"harness": harness, "bare": bare})
    assert runs["bare"][0].json()["personas"] == personas

    fig = Figures(
        f"search-arms + fuse-reference: {personas} personas, 5 retrievers (arms once, 5 fusions)",
        ["", "wall s (mean)", "ms / persona", "CPU s", "peak RSS MiB"],
    )
    for name, label in (("harness", "vipune-eval search-arms + fuse-reference"), ("bare", "bare numpy + FTS5 loop")):
        rs = runs[name]
        wall = mean([r.wall_s for r in rs])
        fig.row(label, wall, 1000 * wall / personas, mean([r.cpu_s for r in rs]), max(r.peak_rss_mib for r in rs))
    fig.ratio(
        "harness / bare (wall)", mean([r.wall_s for r in runs["harness"]]), mean([r.wall_s for r in runs["bare"]])
    )
    fig.ratio("harness / bare (CPU)", mean([r.cpu_s for r in runs["harness"]]), mean([r.cpu_s for r in runs["bare"]]))
    fig.ratio(
        "harness / bare (peak RSS)",
        max(r.peak_rss_mib for r in runs["harness"]),
        max(r.peak_rss_mib for r in runs["bare"]),
    )
    fig.record(benchmark)
