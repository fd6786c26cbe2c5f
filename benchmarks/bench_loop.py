"""The maintainer's loop (issues 43, 54): an edit of vipune's search, from the edit to the numbers.

On LongMemEval_M's shape (``VIPUNE_BENCH_SIZE=M``: 470 personas of 500 session rows of ~2.4 kB;
``small``: 40 personas), vectors from the tiny test model (the vipune-lane's work does not depend on
their values), the real vipune at the pinned release with its vipune-lane (.ci/vipune/build.sh;
skipped, saying why, where it is not built).

Not timed (the loop's cold start): the data filtered and embedded by the workflow, the release's
lib lane run once (``vipune.binary`` = the release, retrievers vipune-lib and vipune-lib-semantic),
and a checkout of the release's own sources (benchmarks/out/loop-checkout/vipune: a fixed folder,
so build.sh's incremental build carries over between sessions) built ``--fast`` and
``--fast --lane-only`` once and run once (its vipune-lane's kept stores seeded).

Each rep, side by side in alternating order, a one-line edit of the checkout's src/rrf.rs (its RRF
k, a new value each time, so every build is one never seen), then:
- ``loop``, the documented loop (docs/reruns.md, "The maintainer's loop"): ``build.sh --checkout DIR
  --fast --lane-only`` (the vipune-lane alone) and ``build.sh`` (the release's, found), then ``snakemake --cores 2`` with ``vipune.binary`` = that lane
  and ``vipune.compare`` = the release: the checkout's lib-lane shards (every persona's kept store
  copied, none seeded), their scores, the report and its summary, then the plots and pages. Split
  from each job's Snakemake benchmark file (its wall seconds, ended when the file was written):
  planning (the start to the first job's start), the vipune-lane (to the last lib-lane shard's end),
  scores and report (to results/summary.txt written), and the plots, pages and HTML report after
  it (to the exit). The limit: the build plus the 470 searches alone (the larger of the two shards'
  steps inside vipune-lane: copying each kept store and the two searches).
- ``today``, the loop as it was before the kept stores and the vipune-lane built alone: ``build.sh --checkout
  DIR --fast`` (binary and lane) and the same run with ``vipune.kept_stores_gb: 0`` (every persona
  seeded, as every search did).
And what the explanations and the gate add to the loop (issue 52), once per rep on the loop's
files: the checkout's two lib-lane shard jobs at once, the report and the HTML page, each with
the explanations and without them, three times in alternating order (the least time of each side;
with: the vipune-lane asked for its arms, which the job parses and writes beside its run; without: the job
as before the arms, in a child that patches them out of stages.search.vipune_lib; the report's
manifest without its ``explained`` builds), and ``vipune-eval gate`` on the run.
The figure: the loop from the edit to the summary against the 15 s goal (issue 54), against
today's loop and against its limit; the disk the kept stores take; the loop with explanations and
the gate against the loop without them.
Checked on the way: each rep reruns only the lib lane's jobs, the report compares the builds, and
the loop's lane copied every store (seeded none).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import yaml

from benchmarks.common import (
    OUT,
    PERSONAS_500_ROWS,
    PYTHON,
    REPO,
    Child,
    Figures,
    cli,
    generate,
    interleaved,
    mean,
    run_child,
    sized,
)

BUILD = REPO / ".ci" / "vipune" / "build.sh"
LIB = ["vipune-lib", "vipune-lib-semantic"]
GOAL_S = 15.0  # issue 54: the numbers within 15 s of the edit
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


# A lib-lane shard job as before the arms were recorded (the "without" side): the vipune-lane not asked
# for them, nothing parsed or written; the job's command line is the loop's own.
WITHOUT_ARMS = r"""
import sys, types
from vipune_eval import cli
from vipune_eval.stages.search import vipune_lib
from vipune_eval.vipune.vipune_lane import VipuneLane
vipune_lib.VipuneLane = lambda lane, folder, timeout, arms=False, store=None: VipuneLane(lane, folder, timeout, store=store)
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
    build_id = provenance["vipune"]["id"]
    fingerprint = workdir / (
        paths.lane_fingerprint_file(build_id)
        if provenance["vipune"].get("lane_only")
        else paths.binary_fingerprint_file(build_id)
    )
    out.mkdir(parents=True, exist_ok=True)

    def shards(side: str) -> Child:
        steps = []
        for i in range(2):
            r = out / f"{side}-{i}"
            argv = cli(
                "search-vipune-lib",
                rows=results / "filter/rows.parquet",
                texts=results / "filter/texts.parquet",
                embeddings=sorted((results / "embed").glob("shard-*.parquet")),
                limit=10,
                depth=10,
                shard=i,
                shards=2,
                binary=binary,
                fingerprint=fingerprint,
                lane=lane,
                lane_fingerprint=workdir / paths.lane_fingerprint_file(provenance["lane"]["id"]),
                timeout=300,
                on_error="stop",
                tmp=r / "tmp",
                out=r / "lib.run",
                semantic_out=r / "semantic.run",
                status_out=r / "status.json",
                arms_out=r / "arms.parquet",
                kept_stores=results / ".cache" / "stores",
                kept_stores_gb=8,
            )  # the loop's stores, reused
            if side == "without":
                argv = [PYTHON, "-c", WITHOUT_ARMS, *argv[3:]]
            steps.append((argv, r / "job.log"))
        return both_at_once(steps)

    manifest = json.loads((results / "report-inputs.json").read_text())
    without = out / "report-inputs-without.json"
    without.write_text(json.dumps({**manifest, "explained": []}))

    def report(side: str) -> Child:  # in the run's folder, as its rule runs: the manifest's paths are relative
        r = out / f"report-{side}"
        argv = cli(
            "report",
            manifest=results / "report-inputs.json" if side == "with" else without,
            out_json=r / "report.json",
            out_md=r / "report.md",
            out_summary=r / "summary.txt",
        )
        return run_child(["bash", "-c", 'cd "$0" && exec "$@"', workdir, *argv], r / "report.log")

    def page(side: str) -> Child:
        r = out / f"report-{side}"
        return run_child(
            cli(
                "report-page",
                report=r / "report.json",
                plots=sorted((results / "plots").glob("*.png")),
                out_page=r / "page.html",
                out_front=r / "front.html",
            ),
            r / "page.log",
        )

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


def finished_jobs(results: Path, since: float) -> dict[str, list[tuple[float, float]]]:
    """Rule → (start, end) of each job that finished after ``since``, in seconds since the epoch,
    from Snakemake's benchmark files (written at a job's end; its first column the job's wall s)."""
    jobs: dict[str, list[tuple[float, float]]] = {}
    for tsv in (results / "benchmarks").rglob("*.tsv"):
        end = tsv.stat().st_mtime
        if end > since:
            wall = float(tsv.read_text().splitlines()[-1].split("\t")[0])
            rule = tsv.relative_to(results / "benchmarks").parts[0].removesuffix(".tsv")
            jobs.setdefault(rule, []).append((end - wall, end))
    return jobs


def bench_loop(benchmark, work, tiny_model, real_build):
    from vipune_eval.core import paths
    from vipune_eval.stages.search.kept_stores import size

    release, _ = real_build
    args = sized(PERSONAS_500_ROWS)
    data = generate(args)
    root = work / "loop"
    checkout = OUT / "loop-checkout" / "vipune"
    if not (checkout / "Cargo.lock").is_file():
        from vipune_eval.vipune.release import RELEASE

        source = subprocess.run(
            ["bash", str(BUILD), "--source", RELEASE], capture_output=True, text=True, check=True
        ).stdout.strip()
        shutil.rmtree(checkout.parent, ignore_errors=True)
        checkout.parent.mkdir(parents=True)
        shutil.copytree(source, checkout, symlinks=True)
    workdir = root / "run"
    workdir.mkdir(parents=True)
    results = workdir / "results"
    config = {
        "dataset": {"path": str(data), "expected": None},
        "model": {"path": str(tiny_model.dir), "file": tiny_model.file},
        "retrievers": LIB,
        "vipune": {"binary": str(release)},
        "embed": {"shards": 2},
        "search": {"shards": 2},
    }
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))

    def snakemake(label: str, vipune: dict) -> tuple[Child, float]:
        (workdir / "config.yaml").write_text(yaml.safe_dump({**config, "vipune": vipune}))
        start = time.time()
        child = run_child(
            [
                PYTHON,
                "-m",
                "snakemake",
                "-s",
                REPO / "workflow" / "Snakefile",
                "--directory",
                workdir,
                "--configfile",
                workdir / "config.yaml",
                "--cores",
                2,
            ],
            root / f"{label}.log",
        )
        return child, start

    snakemake("release", {"binary": str(release)})  # the cold start: filter, embed, the release's lib lane
    edit(checkout, 25.0)
    build(checkout, "--fast")  # the checkout's first fast builds (dependencies compiled once)
    lane, _ = build(checkout, "--fast", "--lane-only")
    snakemake("first", {"binary": str(lane), "compare": [str(release)]})  # its vipune-lane's stores seeded

    ks = iter(25.0 + (i + 1) / 1000 for i in range(10**6))

    def run(side: str, rep: int) -> dict[str, float]:
        edit(checkout, next(ks))
        built, built_s = build(checkout, "--fast", *(["--lane-only"] if side == "loop" else []))
        start = time.perf_counter()  # the documented command names the release by build.sh too (found, not built)
        assert subprocess.run(["bash", str(BUILD)], capture_output=True, text=True).stdout.strip() == str(release)
        built_s += time.perf_counter() - start
        vipune = {"binary": str(built), "compare": [str(release)], **({} if side == "loop" else {"kept_stores_gb": 0})}
        child, start = snakemake(f"{side}-{rep}", vipune)
        jobs = finished_jobs(results, start)
        assert set(jobs) <= {"search_vipune_lib", "score", "report", "plots"}, sorted(jobs)
        summary = (results / "summary.txt").stat().st_mtime
        first = min(s for spans in jobs.values() for s, _ in spans)
        lane_end = max(e for _, e in jobs["search_vipune_lib"])
        report_json = json.loads((results / "report.json").read_text())
        assert len(report_json["builds"]) == 2, "the checkout is not compared with the release"
        build_id = report_json["provenance"]["vipune"]["id"]
        statuses = [
            json.loads(p.read_text())
            for p in sorted(
                (
                    results
                    / "search"
                    / paths.lib_run(build_id if side == "loop" else report_json["provenance"]["lane"]["id"])
                ).glob("shard-*.status.json")
            )
        ]
        steps = [status["lane_seconds"] for status in statuses]
        if side == "loop":
            assert all("copy" in s and "insert" not in s for s in steps), steps  # every store reused
        out = {
            "build": built_s,
            "plan": first - start,
            "lane": lane_end - first,
            "score_report": summary - lane_end,
            "after_summary": child.wall_s - (summary - start),
            "run": child.wall_s,
            "to_summary": built_s + summary - start,
            "to_exit": built_s + child.wall_s,
            "run_cpu": child.cpu_s,
            "searches": max(sum(s.get(k, 0.0) for k in ("copy", "semantic", "hybrid")) for s in steps),
        }
        if side == "loop":  # on the loop's own files: what the explanations and the gate add
            spent = explanation_costs(workdir, built, root / f"explain-{rep}", rep)
            gate = run_child(cli("gate", run=results), root / f"gate-{rep}.log", ok=(0, 1))
            costs.append({**spent, "gate wall": gate.wall_s, "gate cpu": gate.cpu_s})
        return out

    costs: list[dict[str, float]] = []
    sides = interleaved(benchmark, {"loop": lambda rep: run("loop", rep), "today": lambda rep: run("today", rep)})
    new, old = sides["loop"], sides["today"]
    fig = Figures(
        f"the maintainer's loop: {args['instances'] - args['abstention']} personas x "
        f"{args['sessions_per_haystack']} session rows, the lib lane of a checkout against the release, "
        "2 cores",
        ["step", "the loop (s, mean of reps)", "today's loop (s)"],
    )
    labels = {
        "build": "builds (the checkout's: the loop's lane alone, today's binary and lane; the release's found)",
        "plan": "planning, to the first job",
        "lane": "the checkout's lib lane (2 shards)",
        "score_report": "scores and report, to summary.txt",
        "to_summary": "**from the edit to the summary**",
        "after_summary": "plots, pages, HTML report, to the exit",
        "to_exit": "from the edit to snakemake's exit",
        "searches": "the 470 searches inside vipune-lane (larger shard)",
    }
    for step, label in labels.items():
        fig.row(label, mean([r[step] for r in new]), mean([r[step] for r in old]))
    stores = size(results / ".cache" / "stores")
    fig.row("kept stores on disk (GB): the release's and the checkout's lanes", f"{stores / 1e9:.2f}", "–")
    total = mean([r["to_summary"] for r in new])
    fig.ratio("loop, edit → summary / 15 s goal", total, GOAL_S)
    fig.ratio("loop / today's loop (edit → summary)", total, mean([r["to_summary"] for r in old]))
    fig.ratio("loop / today's loop (edit → exit)", mean([r["to_exit"] for r in new]), mean([r["to_exit"] for r in old]))
    fig.ratio(
        "loop / its limit (the vipune-lane's build + the searches alone)",
        total,
        mean([r["build"] + r["searches"] for r in new]),
    )
    added = {
        part: mean([c[f"{part} with wall"] - c[f"{part} without wall"] for c in costs])
        for part in ("lane", "report", "page")
    }
    for part, label in (
        ("lane", "the checkout's 2 lib-lane shards at once"),
        ("report", "the report"),
        ("page", "the HTML page"),
    ):
        for side in ("with", "without"):
            fig.row(
                f"{label}, {side} explanations (wall / CPU)",
                f"{mean([c[f'{part} {side} wall'] for c in costs]):.2f} / "
                f"{mean([c[f'{part} {side} cpu'] for c in costs]):.2f}",
                "",
            )
    gate_s = mean([c["gate wall"] for c in costs])
    fig.row(
        "vipune-eval gate on the run (wall / CPU)", f"{gate_s:.2f} / {mean([c['gate cpu'] for c in costs]):.2f}", ""
    )
    to_exit = mean([r["to_exit"] for r in new])
    fig.ratio(
        "loop with explanations and the gate / without (wall, edit → exit)",
        to_exit + gate_s,
        to_exit - sum(added.values()),
    )
    run_cpu = mean([r["run_cpu"] for r in new])  # the Snakemake run's CPU, its jobs included
    added_cpu = sum(
        mean([c[f"{part} with cpu"] - c[f"{part} without cpu"] for c in costs]) for part in ("lane", "report", "page")
    )
    fig.ratio(
        "loop run with explanations and the gate / without (CPU: steadier than wall on a busy machine)",
        run_cpu + mean([c["gate cpu"] for c in costs]),
        run_cpu - added_cpu,
    )
    fig.note(
        "build = build.sh --checkout DIR --fast [--lane-only] after a one-line edit of src/rrf.rs; planning, "
        "lane, scores and report from each job's Snakemake benchmark file; summary = results/summary.txt written"
    )
    fig.note(
        "today's loop = binary and lane built, every persona seeded (vipune.kept_stores_gb: 0); the limit = the "
        "lane's build + its searches' own seconds (copies of the kept stores and the two searches)"
    )
    fig.note(
        "without explanations = the loop less what the arms add to the lib-lane shards and the explanations to "
        "the report and the page, each measured with and without on the loop's own files; the gate runs after"
    )
    fig.record(benchmark)
