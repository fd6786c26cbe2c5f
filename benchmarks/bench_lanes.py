"""search, vipune's two lanes and the Python mirrors, side by side on LongMemEval_M's shape.

The real vipune at the pinned release and the vipune-lane built beside it (.ci/vipune/build.sh;
the benchmark is skipped, saying why, where they are not built). Personas have 500 session rows
of ~2.4 kB (LongMemEval_M's haystacks; 470 personas at VIPUNE_BENCH_SIZE=M); their vectors come
from the tiny test model (the values do not change the work). The binary's own model, for its
query embedding, is the embed benchmarks' model (all-MiniLM-L6-v2 when present: bge-small has
12 layers of the same width, so the binary lane is cheaper here than with bge-small).

Sides, interleaved per rep, each the whole per-run phase of one lane for every persona:
- ``lib``: ``vipune-eval search-vipune-lib``, one shard (one lane process), and ``lib-2``: two
  shards at once (one per core, as ``--cores 2`` runs them);
- ``lane``: the vipune-lane alone, fed the same personas from a prepared stream (no Python), its
  databases where the harness puts them (in RAM where the machine has /dev/shm): what the harness
  adds around it;
- ``binary``: ``vipune-eval search-vipune`` with 2 concurrent calls (``search.threads: 2``);
- ``mirrors``: the Python copies of the same two searches: ``search-arms`` (the arms) and
  ``fuse-reference`` for ``dense`` and ``hybrid``.
Checked on the way: the lib lane's runs equal the mirrors' (the same vectors, the same algorithm).
Where the lib lane's time goes comes from the vipune-lane's own per-step clock (the status file), and
FTS5 indexing from a ``--breakdown`` pass (the same inserts without the FTS5 trigger).
"""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.common import (
    BGE_REPO_ID,
    BGE_REVISION,
    PERSONAS_500_ROWS,
    Child,
    Figures,
    cli,
    embed_cmd,
    filter_view,
    generate,
    interleaved,
    mean,
    run_child,
    run_children,
    sized,
)

LIMIT = DEPTH = 10


def parallel(steps: list[tuple[list, Path]]) -> Child:
    """Commands at once, as one side: the longest wall, CPU summed, the largest peak RSS."""
    with ThreadPoolExecutor(len(steps)) as pool:
        done = list(pool.map(lambda step: run_child(*step), steps))
    return Child(
        max(c.wall_s for c in done), sum(c.cpu_s for c in done), max(c.peak_rss_mib for c in done), done[-1].stdout
    )


def bench_lanes(benchmark, work, tiny_model, embed_model, real_build):
    from vipune_eval.core.persona import personas_of_shard
    from vipune_eval.core.trec import read_run as read_trec
    from vipune_eval.stages.search.vipune_lib import database_folder
    from vipune_eval.vipune.binary import binary_fingerprint
    from vipune_eval.vipune.settings import VipuneSettings
    from vipune_eval.vipune.vipune_lane import frame, lane_fingerprint

    binary, lane = real_build
    dest = work / "lanes"
    view = dest / "view"
    filter_view(generate(sized(PERSONAS_500_ROWS)), view)
    embeddings = view / "embeddings.parquet"
    run_child(embed_cmd(tiny_model, view / "texts.parquet", embeddings), view / "embed.log")
    hf_home = dest / "vipune-home"
    run_child(
        cli(
            "vipune-home",
            model_dir=embed_model.dir,
            file=embed_model.file,
            repo_id=BGE_REPO_ID,
            revision=BGE_REVISION,
            out=hf_home,
        ),
        dest / "vipune-home.log",
    )
    binary_fp = binary_fingerprint(binary, 60)
    (dest / "fingerprint.json").write_text(json.dumps(binary_fp))
    (dest / "lane.json").write_text(json.dumps(lane_fingerprint(lane, binary_fp, 60)))
    personas = list(personas_of_shard(view / "rows.parquet", view / "texts.parquet", [embeddings], 0, 1))
    n, rows = len(personas), mean([len(p.row_ids) for p in personas])
    chars = mean([mean([len(t) for t in p.texts]) for p in personas])
    stream = dest / "personas.stream"  # the vipune-lane's stdin, prepared beforehand (not timed)
    stream.write_bytes(
        b"".join(frame(p, VipuneSettings("", Path(), None, Path(), 300).query_flags(LIMIT)) for p in personas)
    )
    del personas
    shard = dict(
        rows=view / "rows.parquet", texts=view / "texts.parquet", embeddings=[embeddings], limit=LIMIT, depth=DEPTH
    )

    def lib(shards: int):
        def side(rep: int) -> Child:
            r = dest / f"lib-{shards}-{rep}"
            return parallel(
                [
                    (
                        cli(
                            "search-vipune-lib",
                            **shard,
                            shard=i,
                            shards=shards,
                            binary=binary,
                            fingerprint=dest / "fingerprint.json",
                            lane=lane,
                            lane_fingerprint=dest / "lane.json",
                            timeout=300,
                            on_error="stop",
                            tmp=r / f"tmp{i}",
                            out=r / f"lib-{i}.run",
                            semantic_out=r / f"lib-semantic-{i}.run",
                            status_out=r / f"status-{i}.json",
                            arms_out=r / f"arms-{i}.parquet",
                            kept_stores=r / "stores",
                            kept_stores_gb=0,
                        ),  # every persona seeded
                        r / f"lib-{i}.log",
                    )
                    for i in range(shards)
                ]
            )

        return side

    def bare_lane(*flags: str):
        def side(rep: int) -> Child:
            script = f'exec "{lane}" search {" ".join(flags)} < "{stream}"'
            return run_child(["bash", "-c", script], dest / f"lane{''.join(flags)}-{rep}.log")

        return side

    def binary_lane(rep: int) -> Child:
        r = dest / f"binary-{rep}"
        return run_child(
            cli(
                "search-vipune",
                **shard,
                shard=0,
                shards=1,
                binary=binary,
                fingerprint=dest / "fingerprint.json",
                hf_home=hf_home,
                threads=2,
                timeout=300,
                tmp=r / "tmp",
                on_error="stop",
                cache=r / "cache",
                out=r / "vipune.run",
                semantic_out=r / "semantic.run",
                status_out=r / "status.json",
            ),
            r / "search.log",
        )

    def mirrors(rep: int) -> Child:
        r = dest / f"mirrors-{rep}"
        arms = r / "arms.parquet"
        return run_children(
            [(cli("search-arms", **shard, shard=0, shards=1, arms_out=arms), r / "arms.log")]
            + [
                (
                    cli(
                        "fuse-reference",
                        arms=[arms],
                        retriever=name,
                        limit=LIMIT,
                        depth=DEPTH,
                        outputs=[r / f"{name}.run"],
                    ),
                    r / f"{name}.log",
                )
                for name in ("dense", "hybrid")
            ]
        )

    databases = database_folder(dest / "lane-tmp")  # where the harness puts them: RAM where there is some
    runs = interleaved(
        benchmark,
        {
            "lib": lib(1),
            "lib-2": lib(2),
            "lane": bare_lane("--tmp", str(databases)),
            "binary": binary_lane,
            "mirrors": mirrors,
        },
    )
    assert read_trec([dest / "lib-1-0" / "lib-0.run"]) == read_trec([dest / "mirrors-0" / "hybrid.run"])
    assert read_trec([dest / "lib-1-0" / "lib-semantic-0.run"]) == read_trec([dest / "mirrors-0" / "dense.run"])
    breakdown = bare_lane("--tmp", str(databases), "--breakdown")(0)
    steps: dict[str, float] = {}
    for line in breakdown.stdout.splitlines():
        for step, seconds in json.loads(line)["seconds"].items():
            steps[step] = steps.get(step, 0.0) + seconds
    shutil.rmtree(databases, ignore_errors=True)
    status = json.loads((dest / "lib-1-0" / "status-0.json").read_text())["lane_seconds"]

    fig = Figures(
        f"both lanes and the mirrors: {n} personas of {rows:.0f} rows (~{chars:.0f} characters "
        f"each), vipune {binary_fp['version']}, the binary's model {embed_model.name}",
        ["", "wall s", "CPU s", "CPU ms / persona", "peak RSS MiB"],
    )
    wall = {k: mean([r.wall_s for r in v]) for k, v in runs.items()}
    cpu = {k: mean([r.cpu_s for r in v]) for k, v in runs.items()}
    labels = {
        "lib": "lib lane: search-vipune-lib, 1 shard",
        "lib-2": "lib lane: 2 shards at once (2 cores)",
        "lane": "the vipune-lane alone on a prepared stream",
        "binary": "binary lane: search-vipune, 2 calls at once",
        "mirrors": "Python mirrors: search-arms + fuse dense, hybrid",
    }
    for name, label in labels.items():
        fig.row(label, wall[name], cpu[name], 1000 * cpu[name] / n, max(r.peak_rss_mib for r in runs[name]))
    fig.ratio("lib lane, 2 shards / binary lane, 2 calls at once (wall)", wall["lib-2"], wall["binary"])
    fig.ratio("lib lane / binary lane (CPU)", cpu["lib"], cpu["binary"])
    fig.ratio("lib lane / Python mirrors (CPU)", cpu["lib"], cpu["mirrors"])
    fig.ratio("lib lane / the vipune-lane alone (CPU): the harness around it", cpu["lib"], cpu["lane"])
    total = sum(status.values())
    for step in ("open", "insert", "semantic", "hybrid"):
        fig.ratio(f"lane time in {step} (share of the vipune-lane's clock)", status.get(step, 0.0), total)
    fig.ratio("FTS5 indexing / insert (breakdown pass)", steps["insert"] - steps["insert_without_fts"], steps["insert"])
    fig.note(
        f"the lib lane's whole per-run phase: {wall['lib-2']:.1f} s wall on 2 cores for {n} personas "
        f"(LongMemEval_M: 470); the binary lane's: {wall['binary']:.0f} s"
    )
    fig.record(benchmark)
