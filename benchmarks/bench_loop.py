"""The maintainer's loop (issue 43): an edit of vipune's search, from the edit to the numbers.

On LongMemEval_M's shape (``VIPUNE_BENCH_SIZE=M``: 470 personas of 500 session rows of ~2.4 kB;
``small``: 40 personas), vectors from the tiny test model (the vipune-lane's work does not depend on
their values), the real vipune at the pinned release with its vipune-lane (.ci/vipune/build.sh;
skipped, saying why, where it is not built).

Not timed (the loop's cold start): the data filtered and embedded by the workflow, the release's
lib lane run once (``vipune.binary`` = the release, retrievers vipune-lib and vipune-lib-semantic),
and a checkout of the release's own sources (benchmarks/out/loop-checkout/vipune: a fixed folder,
so build.sh's incremental build carries over between sessions) built ``--fast`` once.

Each rep is the documented loop (docs/reruns.md, "The maintainer's loop"): a one-line edit of the
checkout's src/rrf.rs (its RRF k, a new value each rep, so every rep is a build never seen), then
- ``build``: ``.ci/vipune/build.sh --checkout DIR --fast`` (the binary and its vipune-lane);
- ``run``: ``snakemake --cores 2`` with ``vipune.binary`` = that build and ``vipune.compare`` = the
  release: the checkout's lib-lane shards, their scores, the report and its summary (the release's
  results are kept); split from Snakemake's own job log into planning (start to the first job),
  the vipune-lane (to the last lib-lane shard's end) and score and report (the rest).
Beside it, once per rep on the same edit: the release profile's rebuild (``build.sh --checkout
DIR``, vipune's fat LTO and one codegen unit), the build the fast profile replaces.
And what the explanations add to the loop (issue 52), once per rep on that rep's files, each job
run with them and without them, three times in alternating order (the least time of each side): the checkout's two lib-lane shard jobs at once
(with: the vipune-lane asked for its arms, which the job parses and writes beside its run; without: the
job as before the arms, in a child that patches them out of stages.search.vipune_lib), the report
(with: the explanations of the moved and worst pairs; without: the same manifest without its
``explained`` builds) and the HTML page. The loop without them = the loop's total less the three
differences.
The figure: the loop's total against the one-minute goal, fast against release-profile builds,
and the loop with explanations against the loop without.
Checked on the way: each rep reruns only the lib lane's jobs, and the report compares the builds.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path

import yaml

from benchmarks.common import (OUT, PYTHON, REPO, Child, Figures, cli, generate, interleaved, mean, run_child,
                               sized)
from support.results import read_run, report

DATA = {"small": dict(instances=40, abstention=0, sessions_per_haystack=500, filler_pool=4000, turns_per_session=10,
                      words_per_turn=40, seed=11),
        "M": dict(instances=500, abstention=30, sessions_per_haystack=500, filler_pool=30000, turns_per_session=10,
                  words_per_turn=40, seed=11)}
BUILD = REPO / ".ci" / "vipune" / "build.sh"
LIB = ["vipune-lib", "vipune-lib-semantic"]
GOAL_S = 60.0  # issue 43: the numbers within a minute of the edit
TRIES = 3  # each job's runs with and without the explanations, per rep



def build(checkout: Path, *flags: str) -> tuple[Path, float]:
    """``build.sh --checkout`` on the checkout: the binary's path and the seconds it took."""
    start = time.perf_counter()
    proc = subprocess.run(["bash", str(BUILD), "--checkout", str(checkout), *flags], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"build.sh --checkout {checkout} {' '.join(flags)} failed:\n{proc.stderr[-3000:]}")
    return Path(proc.stdout.strip().splitlines()[-1]), time.perf_counter() - start


def edit(checkout: Path, k: float) -> None:
    """The one-line edit: RrfConfig::default()'s k."""
    rrf = checkout / "src" / "rrf.rs"
    text, n = re.subn(r"Self \{ k: [0-9.]+ \}", f"Self {{ k: {k!r} }}", rrf.read_text())
    assert n == 1, f"{rrf}: no 'Self {{ k: ... }}' to edit"
    rrf.write_text(text)


STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]$")


def job_times(log: str) -> dict[str, list[tuple[float, float]]]:
    """Rule → (start, end) of each job, in seconds since the epoch, from Snakemake's log (its
    timestamp lines before each job's 'rule X:' and 'Finished jobid: N (Rule: X)')."""
    now, started, jobs = None, {}, {}
    rule = None
    for line in log.splitlines():
        m = STAMP.match(line.strip())
        if m:
            now = datetime.strptime(m[1], "%a %b %d %H:%M:%S %Y").timestamp()
            continue
        m = re.match(r"^(?:local)?rule (\w+):", line)
        if m:
            rule = m[1]
            continue
        m = re.match(r"^\s+jobid: (\d+)", line)
        if m and rule:
            started[m[1]] = (rule, now)
            rule = None
            continue
        m = re.match(r"^Finished jobid: (\d+)", line)
        if m and m[1] in started:
            name, start = started.pop(m[1])
            jobs.setdefault(name, []).append((start, now))
    return jobs


# A lib-lane shard job as before the arms were recorded (the "without" side): the vipune-lane not asked
# for them, nothing parsed or written; the job's command line is the loop's own.
WITHOUT_ARMS = r"""
import sys, types
from vipune_eval import cli
from vipune_eval.stages.search import vipune_lib
from vipune_eval.vipune.vipune_lane import VipuneLane
vipune_lib.VipuneLane = lambda lane, folder, timeout, arms=False: VipuneLane(lane, folder, timeout)
vipune_lib.lane_arms = types.SimpleNamespace(from_answer=lambda *args: None, write=lambda *args: None)
sys.exit(cli.main(sys.argv[1:]))
"""


def both_at_once(steps: list[tuple[list, Path]]) -> Child:
    """Commands at once (the loop's two shards on two cores): the longest wall, CPU summed."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(steps)) as pool:
        done = list(pool.map(lambda step: run_child(*step), steps))
    return Child(max(c.wall_s for c in done), sum(c.cpu_s for c in done), max(c.peak_rss_mib for c in done), "")


def explanation_costs(workdir: Path, binary: Path, out: Path, rep: int) -> dict[str, float]:
    """Wall and CPU seconds each job of the loop takes with the explanations and without, run in
    alternating order on the files the loop's last rep made: the checkout's lib-lane shards
    (two at once), the report, the HTML page."""
    from vipune_eval.core import paths
    from vipune_eval.vipune.vipune_lane import find_lane

    results = workdir / "results"
    provenance = json.loads((results / "report.json").read_text())["provenance"]
    lane = find_lane(binary, "checkout")
    out.mkdir(parents=True, exist_ok=True)

    def shards(side: str) -> Child:
        steps = []
        for i in range(2):
            r = out / f"{side}-{i}"
            argv = cli("search-vipune-lib", rows=results / "filter/rows.parquet", texts=results / "filter/texts.parquet",
                       embeddings=sorted((results / "embed").glob("shard-*.parquet")), limit=10, depth=10,
                       shard=i, shards=2, binary=binary, fingerprint=workdir / paths.binary_fingerprint_file(
                           provenance["vipune"]["id"]), lane=lane,
                       lane_fingerprint=workdir / paths.lane_fingerprint_file(provenance["lane"]["id"]), timeout=300,
                       on_error="stop", tmp=r / "tmp", out=r / "lib.run", semantic_out=r / "semantic.run",
                       status_out=r / "status.json", arms_out=r / "arms.parquet")
            if side == "without":
                argv = [PYTHON, "-c", WITHOUT_ARMS, *argv[3:]]
            steps.append((argv, r / "job.log"))
        return both_at_once(steps)

    manifest = json.loads((results / "report-inputs.json").read_text())
    without = out / "report-inputs-without.json"
    without.write_text(json.dumps({**manifest, "explained": []}))

    def report(side: str) -> Child:  # in the run's folder, as its rule runs: the manifest's paths are relative
        r = out / f"report-{side}"
        argv = cli("report", manifest=results / "report-inputs.json" if side == "with" else without,
                   out_json=r / "report.json", out_md=r / "report.md", out_summary=r / "summary.txt")
        return run_child(["bash", "-c", 'cd "$0" && exec "$@"', workdir, *argv], r / "report.log")

    def page(side: str) -> Child:
        r = out / f"report-{side}"
        return run_child(cli("report-page", report=r / "report.json", plots=sorted((results / "plots").glob("*.png")),
                             out_page=r / "page.html", out_front=r / "front.html"), r / "page.log")

    spent: dict[str, float] = {}
    for name, job in (("lane", shards), ("report", report), ("page", page)):
        children: dict[str, list[Child]] = {"with": [], "without": []}
        for attempt in range(TRIES):  # alternating order; the least of each side (the differences are small)
            for side in ("with", "without") if (rep + attempt) % 2 == 0 else ("without", "with"):
                children[side].append(job(side))
        for side, done in children.items():
            spent[f"{name} {side} wall"] = min(c.wall_s for c in done)
            spent[f"{name} {side} cpu"] = min(c.cpu_s for c in done)
    with_report = json.loads((out / "report-with" / "report.json").read_text())
    assert with_report["explanations"]["questions"], "the report explained no pair"
    assert not json.loads((out / "report-without" / "report.json").read_text())["explanations"]["questions"]
    return spent


def bench_loop(benchmark, work, tiny_model, real_build):
    release, _ = real_build
    args = sized(DATA)
    data = generate(args)
    root = work / "loop"
    checkout = OUT / "loop-checkout" / "vipune"
    if not (checkout / "Cargo.lock").is_file():
        from vipune_eval.vipune.release import RELEASE

        source = subprocess.run(["bash", str(BUILD), "--source", RELEASE], capture_output=True, text=True,
                                check=True).stdout.strip()
        shutil.rmtree(checkout.parent, ignore_errors=True)
        checkout.parent.mkdir(parents=True)
        shutil.copytree(source, checkout, symlinks=True)
    workdir = root / "run"
    workdir.mkdir(parents=True)
    config = {"dataset": {"path": str(data), "expected": None},
              "model": {"path": str(tiny_model.dir), "file": tiny_model.file},
              "retrievers": LIB, "vipune": {"binary": str(release)}, "embed": {"shards": 2}, "search": {"shards": 2}}
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))

    def snakemake(label: str):
        log = root / f"{label}.log"
        start = time.time()
        child = run_child([PYTHON, "-m", "snakemake", "-s", REPO / "workflow" / "Snakefile", "--directory", workdir,
                           "--configfile", workdir / "config.yaml", "--cores", 2], log)
        return child, start, child.stdout + log.with_suffix(".err").read_text()

    snakemake("release")  # the cold start: filter, embed, the release's lib lane
    edit(checkout, 25.0)
    build(checkout, "--fast")  # the checkout's first fast build (dependencies compiled once)

    results: list[dict[str, float]] = []
    ks = iter(25.0 + (i + 1) / 1000 for i in range(10**6))

    def loop(rep: int) -> dict[str, float]:
        k = next(ks)
        edit(checkout, k)
        binary, built_s = build(checkout, "--fast")
        (workdir / "config.yaml").write_text(yaml.safe_dump(
            {**config, "vipune": {"binary": str(binary), "compare": [str(release)]}}))
        child, start, log = snakemake(f"loop-{rep}")
        jobs = job_times(log)
        assert set(jobs) <= {"search_vipune_lib", "score", "report", "plots", "report_page", "all"}, sorted(jobs)
        first = min(s for spans in jobs.values() for s, _ in spans)
        lane_end = max(e for _, e in jobs["search_vipune_lib"])
        built = report(workdir)["builds"]
        assert len(built) == 2 and read_run(workdir / built[0]["run"]), "the checkout is not compared on vipune-lib"
        out = {"k": k, "build": built_s, "plan": first - start, "lane": lane_end - first,
               "score_report": child.wall_s - (lane_end - start), "run": child.wall_s,
               "total": built_s + child.wall_s, "lane_cpu": child.cpu_s}
        results.append(out)
        built_binaries.append(binary)
        return out

    built_binaries: list[Path] = []

    def explanations(rep: int) -> dict[str, float]:
        return explanation_costs(workdir, built_binaries[-1], root / f"explain-{rep}", rep)

    def release_profile(rep: int) -> float:
        edit(checkout, 30.0 + rep)  # another edit of the same line, built as vipune's release profile
        return build(checkout)[1]

    sides = interleaved(benchmark, {"loop": loop, "explanations": explanations,
                                    "release-profile build": release_profile})
    loops, full = sides["loop"], sides["release-profile build"]
    costs = sides["explanations"]
    fig = Figures(f"the maintainer's loop: {args['instances'] - args['abstention']} personas x "
                  f"{args['sessions_per_haystack']} session rows, the lib lane of a checkout against the release, "
                  "2 cores", ["step", "seconds (mean of reps)"])
    for step in ("build", "plan", "lane", "score_report", "run", "total"):
        fig.row(step, mean([r[step] for r in loops]))
    fig.row("release-profile build of the same edit", mean(full))
    added = {part: mean([c[f"{part} with wall"] - c[f"{part} without wall"] for c in costs])
             for part in ("lane", "report", "page")}
    for part, label in (("lane", "the checkout's 2 lib-lane shards at once"), ("report", "the report"),
                        ("page", "the HTML page")):
        for side in ("with", "without"):
            fig.row(f"{label}, {side} explanations (wall / CPU)",
                    f"{mean([c[f'{part} {side} wall'] for c in costs]):.2f} / "
                    f"{mean([c[f'{part} {side} cpu'] for c in costs]):.2f}")
    total = mean([r["total"] for r in loops])
    fig.ratio("loop total / 60 s goal", total, GOAL_S)
    fig.ratio("fast build / release-profile build", mean([r["build"] for r in loops]), mean(full))
    fig.ratio("loop with explanations / without (wall)", total, total - sum(added.values()))
    run_cpu = mean([r["lane_cpu"] for r in loops])  # the Snakemake run's CPU, its jobs included
    added_cpu = sum(mean([c[f"{part} with cpu"] - c[f"{part} without cpu"] for c in costs])
                    for part in ("lane", "report", "page"))
    fig.ratio("loop run with explanations / without (CPU: steadier than wall on a busy machine)", run_cpu,
              run_cpu - added_cpu)
    fig.ratio("lib-lane shards with the arms / without (CPU)", mean([c["lane with cpu"] for c in costs]),
              mean([c["lane without cpu"] for c in costs]))
    fig.note("build = build.sh --checkout DIR --fast after a one-line edit of src/rrf.rs; run = snakemake "
             "(plan: to its first job; lane: to the last lib-lane shard's end; score_report: the rest)")
    fig.note("without explanations = the loop's total less what the arms add to the lib-lane shards and the "
             "explanations to the report and the page, each measured with and without on the loop's own files")
    fig.record(benchmark)
