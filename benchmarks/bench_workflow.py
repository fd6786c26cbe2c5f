"""workflow: what Snakemake costs around the stages, and what a changed binary reruns.

On generated data with the tiny model and the fake vipune (session view, seed protocol):
1. a dry run in a fresh folder with `search.shards` 8 and with one shard per pair, interleaved:
   how planning grows with the number of jobs;
2. a cold run (`search.shards` 2), then a no-op run, then a run after the binary's bytes
   changed (a comment appended to the wrapper): each as a ratio to the cold run of the same
   session. The sequence is inherently ordered (no interleaving); the jobs counts are exact.
"""

from __future__ import annotations

import re

import yaml

from benchmarks.common import PYTHON, REPO, Figures, generate, interleaved, mean, run_child, sized

SIZES = {
    "small": dict(
        instances=20,
        abstention=2,
        sessions_per_haystack=10,
        filler_pool=60,
        turns_per_session=2,
        words_per_turn=10,
        seed=3,
    ),
    "M": dict(
        instances=500,
        abstention=30,
        sessions_per_haystack=10,
        filler_pool=300,
        turns_per_session=2,
        words_per_turn=10,
        seed=3,
    ),
}


def jobs(text: str) -> int:
    if "Nothing to be done" in text:
        return 0
    m = re.search(r"^total\s+(\d+)", text, re.M)
    if not m:
        raise AssertionError(f"no job count in Snakemake's output:\n{text[-2000:]}")
    return int(m[1])


def bench_workflow(benchmark, work, tiny_model, fake_vipune):
    args = sized(SIZES)
    data = generate(args)
    pairs = args["instances"] - args["abstention"]
    binary = work / "workflow-bin" / "vipune"  # a copy: this benchmark changes its bytes
    binary.parent.mkdir()
    binary.write_bytes(fake_vipune.read_bytes())
    binary.chmod(0o755)

    def folder(name: str, shards: int):
        wd = work / "workflow" / name
        wd.mkdir(parents=True, exist_ok=True)
        config = {
            "dataset": {"path": str(data), "expected": None},
            "model": {"path": str(tiny_model.dir), "file": tiny_model.file},
            "vipune": {"binary": str(binary)},
            "embed": {"shards": 2},
            "search": {"shards": shards},
        }
        (wd / "config.yaml").write_text(yaml.safe_dump(config))
        return wd

    def snakemake(wd, label: str, *extra):
        child = run_child(
            [
                PYTHON,
                "-m",
                "snakemake",
                "-s",
                REPO / "workflow" / "Snakefile",
                "--directory",
                wd,
                "--configfile",
                wd / "config.yaml",
                "--cores",
                2,
                *extra,
            ],
            wd.parent / f"{wd.name}-{label}.log",
        )
        return child, jobs(child.stdout + (wd.parent / f"{wd.name}-{label}.err").read_text())

    dry = interleaved(
        benchmark,
        {shards: (lambda rep, s=shards: snakemake(folder(f"dry-{s}-{rep}", s), "dry", "-n")) for shards in (8, pairs)},
    )
    wd = folder("run", 2)
    cold, cold_jobs = snakemake(wd, "cold")
    noop, noop_jobs = snakemake(wd, "noop")
    with open(binary, "a") as f:
        f.write("# rebuilt\n")
    changed, changed_jobs = snakemake(wd, "binary-changed")

    fig = Figures(
        f"workflow: {pairs} pairs x {args['sessions_per_haystack']} sessions, tiny model, fake vipune, "
        "Snakemake --cores 2",
        ["run", "jobs", "wall s", "CPU s"],
    )
    for shards in (8, pairs):
        rs = dry[shards]
        fig.row(
            f"dry run, fresh folder, search.shards {shards}",
            rs[0][1],
            mean([r.wall_s for r, _ in rs]),
            mean([r.cpu_s for r, _ in rs]),
        )
    fig.row("cold run, search.shards 2", cold_jobs, cold.wall_s, cold.cpu_s)
    fig.row("no-op run", noop_jobs, noop.wall_s, noop.cpu_s)
    fig.row("after the binary's bytes changed", changed_jobs, changed.wall_s, changed.cpu_s)
    fig.ratio(
        f"dry run: {pairs} shards / 8 shards (wall)",
        mean([r.wall_s for r, _ in dry[pairs]]),
        mean([r.wall_s for r, _ in dry[8]]),
    )
    fig.ratio(f"dry run: {pairs} shards / 8 shards (jobs)", dry[pairs][0][1], dry[8][0][1])
    fig.ratio("no-op / cold (wall)", noop.wall_s, cold.wall_s)
    fig.ratio("binary changed / cold (wall)", changed.wall_s, cold.wall_s)
    fig.ratio("binary changed / cold (jobs)", changed_jobs, cold_jobs)
    fig.record(benchmark)
    assert noop_jobs == 0, "a no-op run planned jobs"  # correctness, not timing
