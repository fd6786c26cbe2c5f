"""search, the binary lane, the real binary: where a persona's time goes, harness beside bare calls.

The real vipune at the pinned release (built by .ci/vipune/build.sh; the benchmark is skipped,
saying why, where it is not built). Its model is the embed benchmarks' model (all-MiniLM-L6-v2
beside the checkout when present: a real 384-d BERT of 6 layers; bge-small has 12 of the same
width, so its load and query embedding cost more) laid out where vipune looks. Personas have
~500 session rows, LongMemEval_M's haystack size; their vectors come from the tiny test model
(the values do not change the work vipune does).

Sides, interleaved per rep:
- ``harness``: ``vipune-eval search-vipune`` over the shard, 1 concurrent call, and
  ``harness-2`` with 2 (``search.threads``, one per core); ``empty``: the same job on a shard
  with no pair (its start-up: interpreter, imports, the binary's fingerprint, the outputs), which
  tells a job's fixed cost from the per-persona work. Each job also writes its own process's CPU
  apart from its vipune calls' (``OWN_CPU``): the harness's own work, without the noise of
  vipune's CPU in ``harness - bare``;
- ``bare``: per persona the vipune-lane's calls — ``import``, ``search --hybrid``, ``search --no-hybrid`` —
  one after another from a prepared JSONL, nothing else;
- ``parts``: per persona, each call timed alone, and the pieces that tell them apart: ``version``
  (process start and opening a database, no model), a search on a one-row database (start, model
  load, one query embedding), ``import`` with ``--project`` (no git look-up for the project);
- ``mcp``: what the harness could do instead: per persona the same ``import``, then both searches
  through one ``vipune mcp`` process (its stdio server, ``search_memories``), so one model load
  instead of two; its rankings must equal the CLI's (checked on the way).

Every side is timed in wall and CPU seconds (vipune's own CPU included): on a loaded machine the
wall times of one call swell, the CPU times much less, so the parts are told apart in CPU time.
The per-persona figures and the two harness settings give the 470-persona projection on 2 cores.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import time
from types import SimpleNamespace

from benchmarks.common import (
    BGE_REPO_ID,
    BGE_REVISION,
    Figures,
    cli,
    embed_cmd,
    filter_view,
    generate,
    import_files,
    interleaved,
    mean,
    run_child,
    sized,
)

PERSONAS = {"small": 6, "M": 24}
DATA = dict(abstention=0, sessions_per_haystack=500, filler_pool=4000, turns_per_session=6, words_per_turn=30, seed=5)
LIMIT = DEPTH = 10
M_PERSONAS = 470
M_SHARDS = 8  # config.yaml's search.shards: the jobs whose start-up the 470 personas pay


# `python -m vipune_eval ARGS` that also writes its own CPU apart from its children's (vipune's
# calls) to the file named first: the harness's own work, free of the noise of vipune's CPU.
OWN_CPU = r"""
import atexit, json, resource, runpy, sys
out = sys.argv.pop(1)

def dump():
    own, calls = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out, "w") as f:
        json.dump({"own_s": own.ru_utime + own.ru_stime, "calls_s": calls.ru_utime + calls.ru_stime}, f)

atexit.register(dump)
runpy.run_module("vipune_eval", run_name="__main__", alter_sys=True)
"""


def bench_vipune_real(benchmark, work, tiny_model, embed_model, real_vipune):
    from vipune_eval.core.persona import personas_of_shard
    from vipune_eval.stages.search.vipune import searches
    from vipune_eval.vipune.binary import binary_fingerprint
    from vipune_eval.vipune.client import Vipune
    from vipune_eval.vipune.import_format import import_lines
    from vipune_eval.vipune.settings import VipuneSettings

    n = sized(PERSONAS)
    dest = work / "vipune-real"
    view = dest / "view"
    filter_view(generate({**DATA, "instances": n}), view)
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
    fingerprint = dest / "fingerprint.json"
    fingerprint.write_text(json.dumps(binary_fingerprint(real_vipune, 60)))
    personas = list(personas_of_shard(view / "rows.parquet", view / "texts.parquet", [embeddings], 0, 1))
    assert len(personas) == n
    rows = mean([len(p.row_ids) for p in personas])
    jobs = import_files(personas, dest / "bare")  # prepared beforehand, not timed
    one_row = dest / "one-row"  # a database of one row: a search there is start-up + model load
    one_row.mkdir()
    (one_row / "import.jsonl").write_text("\n".join(import_lines(personas[0])[:2]) + "\n", encoding="utf-8")
    client = Vipune(real_vipune, dest / "home", 300, hf_home=hf_home)  # the harness's environment
    settings = VipuneSettings(str(real_vipune), fingerprint, hf_home, dest / "tmp", 300)

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def call(*args) -> tuple[float, float]:
        """One vipune call: (wall s, CPU s)."""
        start, start_cpu = time.perf_counter(), cpu()
        proc = subprocess.run(
            [str(real_vipune), *map(str, args)], capture_output=True, text=True, env=client.env, cwd=dest
        )
        seconds = time.perf_counter() - start, cpu() - start_cpu
        if proc.returncode != 0:
            raise RuntimeError(f"exit {proc.returncode}: {args}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        return seconds

    def search(db, p, arm: str) -> tuple[float, float]:
        return call(
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
        )

    call("--db-path", one_row / "memories.db", "--json", "import", one_row / "import.jsonl")

    def bare(rep: int) -> dict:
        start, start_cpu = time.perf_counter(), cpu()
        for folder, p in jobs:
            db = folder / "memories.db"
            db.unlink(missing_ok=True)
            call("--db-path", db, "--json", "import", folder / "import.jsonl")
            search(db, p, "--hybrid")
            search(db, p, "--no-hybrid")
        return {"wall_s": time.perf_counter() - start, "cpu_s": cpu() - start_cpu}

    def parts(rep: int) -> dict:
        out = {k: [] for k in ("version", "import", "import_project", "hybrid", "semantic", "one_row")}
        for folder, p in jobs:
            db = folder / "parts.db"
            db.unlink(missing_ok=True)
            out["version"].append(call("--db-path", db, "--json", "version"))
            db.unlink(missing_ok=True)
            out["import"].append(call("--db-path", db, "--json", "import", folder / "import.jsonl"))
            db.unlink(missing_ok=True)
            out["import_project"].append(
                call("--db-path", db, f"--project={p.question_id}", "--json", "import", folder / "import.jsonl")
            )
            out["hybrid"].append(search(db, p, "--hybrid"))
            out["semantic"].append(search(db, p, "--no-hybrid"))
            out["one_row"].append(search(one_row / "memories.db", personas[0], "--no-hybrid"))
        return {k: (mean([w for w, _ in v]), mean([c for _, c in v])) for k, v in out.items()}

    def mcp_searches(db, p) -> list[list[str]]:
        """Both searches of a persona through one `vipune mcp` process (JSON-RPC over stdio)."""
        proc = subprocess.Popen(
            [str(real_vipune), "--db-path", str(db), f"--project={p.question_id}", "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=client.env,
            cwd=dest,
        )

        def ask(message: dict) -> dict | None:
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
            proc.stdin.flush()
            return json.loads(proc.stdout.readline()) if "id" in message else None

        ask(
            {
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "vipune-eval", "version": "0"},
                },
            }
        )
        ask({"method": "notifications/initialized"})
        ranked = []
        for i, hybrid in enumerate((True, False), start=1):
            answer = ask(
                {
                    "id": i,
                    "method": "tools/call",
                    "params": {
                        "name": "search_memories",
                        "arguments": {
                            "query": p.question,
                            "limit": LIMIT,
                            "hybrid": hybrid,
                            "recency_weight": 0.0,
                            "no_touch": True,
                        },
                    },
                }
            )
            ranked.append([hit["id"] for hit in json.loads(answer["result"]["content"][0]["text"])])
        proc.stdin.close()
        proc.wait()
        return ranked

    def mcp(rep: int) -> dict:
        start, start_cpu = time.perf_counter(), cpu()
        for folder, p in jobs:
            db = folder / "mcp.db"
            db.unlink(missing_ok=True)
            call("--db-path", db, "--json", "import", folder / "import.jsonl")
            ranked = mcp_searches(db, p)
            if rep == 0:
                cli_ranked = [
                    [hit["id"] for hit in client.search(db, p.question_id, p.question, flags, LIMIT, "")[0]]
                    for flags in searches(settings, LIMIT).values()
                ]
                assert ranked == cli_ranked, (p.question_id, ranked, cli_ranked)
        return {"wall_s": time.perf_counter() - start, "cpu_s": cpu() - start_cpu}

    def harness(threads: int, shard: int = 0, shards: int = 1, name: str = "harness"):
        def side(rep: int):
            cache = dest / "cache-lane"  # finished personas are cached: every pass starts empty
            shutil.rmtree(cache, ignore_errors=True)
            r = dest / f"{name}-{threads}-{rep}"
            argv = cli(
                "search-vipune",
                rows=view / "rows.parquet",
                texts=view / "texts.parquet",
                embeddings=[embeddings],
                shard=shard,
                shards=shards,
                limit=LIMIT,
                depth=DEPTH,
                binary=real_vipune,
                fingerprint=fingerprint,
                hf_home=hf_home,
                threads=threads,
                timeout=300,
                tmp=r / "tmp",
                on_error="stop",
                cache=cache,
                out=r / "vipune.run",
                semantic_out=r / "semantic.run",
                status_out=r / "status.json",
            )
            assert argv[1:3] == ["-m", "vipune_eval"], argv
            child = run_child(
                [argv[0], "-c", OWN_CPU, r / "own-cpu.json", *argv[3:]], dest / f"{name}-{threads}-{rep}.log"
            )
            return SimpleNamespace(
                wall_s=child.wall_s, cpu_s=child.cpu_s, own_s=json.loads((r / "own-cpu.json").read_text())["own_s"]
            )

        return side

    # shard n of n + 1 holds no pair: the job's start-up alone (interpreter, imports, fingerprint, outputs)
    runs = interleaved(
        benchmark,
        {
            "harness": harness(1),
            "harness-2": harness(2),
            "bare": bare,
            "parts": parts,
            "mcp": mcp,
            "empty": harness(1, n, n + 1, "empty"),
        },
    )
    side = {
        name: (mean([r.wall_s for r in runs[name]]) / n, mean([r.cpu_s for r in runs[name]]) / n)
        for name in ("harness", "harness-2", "empty")
    }
    own = {name: mean([r.own_s for r in runs[name]]) / n for name in ("harness", "harness-2", "empty")}
    for name in ("bare", "mcp"):
        side[name] = (mean([r["wall_s"] for r in runs[name]]) / n, mean([r["cpu_s"] for r in runs[name]]) / n)
    part = {k: tuple(mean([r[k][i] for r in runs["parts"]]) for i in (0, 1)) for k in runs["parts"][0]}
    fig = Figures(
        f"binary lane, real vipune at the pinned release: {n} personas of {rows:.0f} rows, model {embed_model.name}",
        ["", "wall ms / persona", "CPU ms / persona", f"{M_PERSONAS} personas, CPU min"],
    )

    def row(label: str, wall: float | str, cpu_s: float, minutes: float | None = None) -> None:
        fig.row(
            label,
            wall if isinstance(wall, str) else 1000 * wall,
            1000 * cpu_s,
            cpu_s * M_PERSONAS / 60 if minutes is None else minutes,
        )

    def minus_sides(a: str, b: str) -> tuple[float, float]:
        return side[a][0] - side[b][0], side[a][1] - side[b][1]

    def minus(a: str, b: str) -> tuple[float, float]:
        return part[a][0] - part[b][0], part[a][1] - part[b][1]

    both_searches = tuple((part["hybrid"][i] + part["semantic"][i]) / 2 for i in (0, 1))
    row("harness: search-vipune, 1 call at a time", *side["harness"])
    row("harness: search-vipune, 2 calls at a time", *side["harness-2"])
    row("bare: import + 2 searches, one after another", *side["bare"])
    row("bare, searches through one `vipune mcp` process: import + 1 model load", *side["mcp"])
    row("  import (no model)", *part["import"])
    row("  search --hybrid", *part["hybrid"])
    row("  search --no-hybrid", *part["semantic"])
    row("per call: process start + opening the database (`version`)", *part["version"])
    row("per search: model load + one query embedding (1-row search - version)", *minus("one_row", "version"))
    row(
        "per search: the search itself (500 rows: FTS5, cosine, fusion)",
        both_searches[0] - part["one_row"][0],
        both_searches[1] - part["one_row"][1],
    )
    row("per import: reading and inserting the rows (import - version)", *minus("import", "version"))
    row("per import: git asked for the project (no --project)", *minus("import", "import_project"))
    row("harness - bare (1 call at a time)", *minus_sides("harness", "bare"))
    row("harness: its own process's CPU (vipune's calls excluded), 1 call at a time", "", own["harness"])
    row(
        f"  of which the job's start-up (an empty shard), spread over {n} personas (470: {M_SHARDS} jobs)",
        "",
        own["empty"],
        own["empty"] * n * M_SHARDS / 60,
    )
    row(
        "  of which per persona (import JSONL, cache key, files, spawning, answers, Parquet rows)",
        "",
        own["harness"] - own["empty"],
    )
    row(
        "harness: its vipune calls' CPU (what bare measures), 1 call at a time", "", side["harness"][1] - own["harness"]
    )
    load = part["one_row"][1] - part["version"][1]
    fig.ratio("harness CPU / bare CPU (1 call at a time)", side["harness"][1], side["bare"][1])
    fig.ratio("harness's own CPU / bare CPU (1 call at a time)", own["harness"], side["bare"][1])
    fig.ratio(
        "harness's own CPU less start-up / bare CPU (what a shard of many personas approaches)",
        own["harness"] - own["empty"],
        side["bare"][1],
    )
    fig.ratio("harness wall (2 at a time) / bare wall", side["harness-2"][0], side["bare"][0])
    fig.ratio("model loads (2 per persona) / bare CPU", 2 * load, side["bare"][1])
    fig.ratio("process starts (3 per persona) / bare CPU", 3 * part["version"][1], side["bare"][1])
    fig.ratio("searches through `vipune mcp` / bare CPU", side["mcp"][1], side["bare"][1])
    fig.note(
        f"{M_PERSONAS} personas on 2 cores: about {side['harness'][1] * M_PERSONAS / 2 / 60:.1f} min of "
        f"harness CPU per core (wall here, loaded machine: {side['harness-2'][0] * M_PERSONAS / 60:.1f} min "
        f"with 2 calls at a time); of that, vipune's two model loads per persona are "
        f"{2 * load * M_PERSONAS / 2 / 60:.1f} min per core: every `search` process loads the model."
    )
    fig.record(benchmark)
