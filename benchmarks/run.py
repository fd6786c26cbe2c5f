#!/usr/bin/env python3
"""Benchmarks of the vipune-eval stages and of the workflow as a whole.

    python benchmarks/run.py info       # machine, date, versions
    python benchmarks/run.py filter     # streaming filter on an M-sized and a 1/4-sized file
    python benchmarks/run.py embed      # `vipune-eval embed` vs a bare fastembed loop (MiniLM)
    python benchmarks/run.py search     # vipune lane vs bare binary calls; search-reference, 470 personas
    python benchmarks/run.py dag        # snakemake dry run / no-op run, search.shards 8 and 470
    python benchmarks/run.py reruns     # cold run, run after the binary changed, no-op run
    python benchmarks/run.py granularities  # session/turn/chunk rows: texts, tokens, MiniLM texts/s, hours
    python benchmarks/run.py sweep      # MiniLM texts/s over batch size x threads; fraction of matmul peak
    python benchmarks/run.py shard-memory  # peak RSS of one search shard, 2/4/8 personas, two package refs
    python benchmarks/run.py all        # everything above, in that order

Every benchmark prints its figures and writes them to ``benchmarks/out/<name>.json``; generated
data lives under ``benchmarks/out/`` (git-ignored) and is reused when its generator arguments
match. Nothing is asserted about timings. The machine is shared, so comparisons are made side by
side inside one invocation and reported as ratios.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "out"
PYTHON = sys.executable
VENV_BIN = Path(PYTHON).parent
MINILM = Path("/work/shared/models/all-MiniLM-L6-v2-onnx")
BGE_REPO_ID = "BAAI/bge-small-en-v1.5"
sys.path.insert(0, str(REPO / "tests"))  # test support (data generator, tiny model)
BGE_REVISION = "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"
FAKE_VIPUNE = REPO / "tests" / "fake_vipune.py"
MB = 1_000_000

# LongMemEval_M-like: 500 instances (30 abstention), 500 sessions per haystack, ~11 kB sessions
# (12 turns of 150 words), fillers drawn from a large shared pool -> about 2.7 GB.
M_ARGS = dict(instances=500, abstention=30, sessions=500, filler_pool=20000, turns=12,
              words_per_turn=150, seed=1)
QUARTER_ARGS = {**M_ARGS, "sessions": 125}
# M-like haystack counts with short texts (the tiny model embeds them quickly): search bench.
SEARCH_ARGS = dict(instances=500, abstention=30, sessions=500, filler_pool=20000, turns=6,
                   words_per_turn=30, seed=2)
# 470 pairs with very short haystacks: the DAG bench (the cost is in the number of jobs).
DAG_ARGS = dict(instances=500, abstention=30, sessions=10, filler_pool=300, turns=2,
                words_per_turn=10, seed=3)
# LongMemEval_S-like: 470 pairs x 50 sessions of ~3.7 kB: the maintainer's rerun loop.
RERUN_ARGS = dict(instances=500, abstention=30, sessions=50, filler_pool=5000, turns=10,
                  words_per_turn=60, seed=4)


# ------------------------------------------------------------------ helpers


SNAPSHOT: Path | None = None  # a frozen copy of the package and workflow, see snapshot()


def snapshot() -> Path:
    """Export the last commit (package, Snakefile, workflow, profiles) to benchmarks/out/snapshot
    and run the workflow benchmarks from it.

    Other people edit the tree while benchmarks run; an edited module changes the rules' code
    params and the workflow would (rightly) rerun jobs mid-benchmark. Child processes get the
    copy first on PYTHONPATH; their working directory is never the repository root.
    """
    global SNAPSHOT
    import io
    import tarfile
    dest = OUT / "snapshot"
    shutil.rmtree(dest, ignore_errors=True)
    # the last commit, not the working tree: work in progress of others may be half-done
    archive = subprocess.run(["git", "-C", REPO, "archive", "--format=tar", "HEAD"],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    # the editable install's import hook maps vipune_eval to the live tree ahead of PYTHONPATH:
    # drop it in every child process (sitecustomize runs after the .pth hooks are installed)
    (dest / "sitecustomize.py").write_text(
        "import sys\nsys.meta_path[:] = [f for f in sys.meta_path\n"
        "                   if not getattr(f, '__module__', '').startswith('__editable__')]\n")
    (dest / "SNAPSHOT.json").write_text(json.dumps({"commit": commit}, indent=2))
    SNAPSHOT = dest
    sys.path.insert(0, str(dest))
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
    return dest


def env() -> dict[str, str]:
    e = dict(os.environ)
    if SNAPSHOT is not None:
        e["PYTHONPATH"] = os.pathsep.join([str(SNAPSHOT), *filter(None, [e.get("PYTHONPATH")])])
    e["PATH"] = os.pathsep.join([str(VENV_BIN), e.get("PATH", "")])
    e["HF_HUB_OFFLINE"] = "1"
    return e


def say(*parts: object) -> None:
    print(*parts, flush=True)


def run(cmd: list[str], *, check: bool = True, log: Path | None = None, **kw) -> tuple[float, subprocess.CompletedProcess]:
    """Run ``cmd``; return (wall seconds, process). Output is captured (and saved to ``log``)."""
    start = time.perf_counter()
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=kw.pop("env", env()), **kw)
    seconds = time.perf_counter() - start
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"$ {' '.join(map(str, cmd))}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
    if check and proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(map(str, cmd))}\n"
                         f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return seconds, proc


def run_time_v(cmd: list[str], log: Path) -> dict[str, float]:
    """Run ``cmd`` under GNU time -v: wall seconds, peak RSS (bytes), user+sys CPU seconds."""
    stats = log.with_suffix(".time")
    log.parent.mkdir(parents=True, exist_ok=True)
    seconds, _ = run(["/usr/bin/time", "-v", "-o", stats, *cmd], log=log)
    return {**parse_time_v(stats), "wall_s": seconds}


def parse_time_v(stats: Path) -> dict[str, float]:
    text = stats.read_text()
    clock = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text)[1]
    seconds = sum(float(x) * 60 ** i for i, x in enumerate(reversed(clock.split(":"))))
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)[1])
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", text)[1])
    system = float(re.search(r"System time \(seconds\): ([\d.]+)", text)[1])
    return {"wall_s": seconds, "peak_rss_bytes": rss_kb * 1024, "cpu_s": user + system}


def generate(path: Path, args: dict) -> dict:
    """Generate a synthetic LongMemEval file once; reused while its arguments are unchanged."""
    stamp = path.with_name(path.name + ".args.json")
    if path.exists() and stamp.exists() and json.loads(stamp.read_text())["args"] == args:
        return json.loads(stamp.read_text())
    path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [PYTHON, str(REPO / "tests" / "support" / "synthetic.py"), path, "--instances", args["instances"],
           "--abstention", args["abstention"], "--sessions", args["sessions"],
           "--filler-pool", args["filler_pool"], "--turns", args["turns"],
           "--words-per-turn", args["words_per_turn"], "--seed", args["seed"]]
    say(f"  generating {path.name} {args} ...")
    seconds, proc = run(cmd)
    record = {"args": args, "bytes": path.stat().st_size, "generate_s": round(seconds, 1),
              "summary": json.loads(proc.stdout)}
    stamp.write_text(json.dumps(record, indent=2))
    say(f"  generated {path.stat().st_size / MB:.0f} MB in {seconds:.0f} s")
    return record


def warm(path: Path) -> None:
    """Read a file once so every timed reader sees the same (warm) page cache."""
    with open(path, "rb") as handle:
        while handle.read(1 << 24):
            pass


def tiny_model() -> Path:
    folder = OUT / "tiny-model"
    if not (folder / "model.onnx").exists():
        from support.tinymodel import build_tiny_model
        build_tiny_model(folder)
    return folder


def fake_vipune(folder: Path) -> Path:
    """A ``vipune`` shell wrapper around tests/fake_vipune.py (as the test fixture makes it)."""
    wrapper = folder / "vipune"
    folder.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(f'#!/bin/sh\nexec "{PYTHON}" "{FAKE_VIPUNE}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def run_filter(dataset: Path, dest: Path) -> tuple[dict, dict]:
    """``filter`` (pairs, qrels, summary) then ``filter-rows`` (rows, unique texts), each timed;
    the stats are their sums (wall, CPU) and the larger peak RSS."""
    pairs = run_time_v(["vipune-eval", "filter", "--dataset", dataset, "--pairs-out", dest / "pairs.parquet",
                        "--qrels-out", dest / "qrels.txt", "--summary-out", dest / "summary.json"],
                       dest / "filter.log")
    rows = run_time_v(["vipune-eval", "filter-rows", "--dataset", dataset, "--rows-out", dest / "rows.parquet",
                       "--texts-out", dest / "texts.parquet"], dest / "filter-rows.log")
    stats = {k: pairs[k] + rows[k] for k in pairs if k != "peak_rss_bytes"}
    stats.update(peak_rss_bytes=max(pairs["peak_rss_bytes"], rows["peak_rss_bytes"]), filter=pairs, filter_rows=rows)
    return stats, filter_summary(dest)


def filter_summary(dest: Path) -> dict:
    """The filter's summary.json plus the unique texts filter-rows wrote."""
    import pyarrow.parquet as pq
    summary = json.loads((dest / "summary.json").read_text())
    summary["unique_texts"] = pq.read_metadata(dest / "texts.parquet").num_rows
    return summary


def model_fingerprint(dest: Path, model_dir: Path) -> Path:
    """A model fingerprint file for ``embed`` (its hash labels the shard; the content is ours)."""
    path = dest / "model-fingerprint.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"model_dir": str(model_dir), "benchmark": True}))
    return path


def save(name: str, result: dict) -> None:
    result = {"benchmark": name, "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
              "machine": machine(), **result}
    (OUT / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    say(f"  -> {OUT / f'{name}.json'}")


def machine() -> dict:
    load = os.getloadavg()
    cpu = ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"nproc": os.cpu_count(), "cpu": cpu, "mem_gib": round(mem / 2**30, 1),
            "loadavg": [round(x, 2) for x in load], "python": platform.python_version(),
            "platform": platform.platform()}


def table(rows: list[list[object]], head: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, ["-" * w for w in widths], *rows]:
        say("  " + "  ".join(str(c).rjust(w) for c, w in zip(r, widths)))


# ------------------------------------------------------------------ 0. info


def bench_info(a: argparse.Namespace) -> None:
    import importlib.metadata as md
    versions = {}
    for name in ("vipune-eval", "snakemake", "fastembed", "onnxruntime", "pyarrow", "ijson", "numpy"):
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            versions[name] = "?"
    import ijson
    info = {"machine": machine(), "versions": versions, "ijson_backend": ijson.backend,
            "date": dt.datetime.now().astimezone().isoformat(timespec="seconds")}
    say(json.dumps(info, indent=2))


# ------------------------------------------------------------------ 1. filter

BARE_IJSON = """
import sys, ijson
n = 0
with open(sys.argv[1], 'rb') as f:
    for inst in ijson.items(f, 'item', use_float=True):
        n += len(inst['haystack_sessions'])
print(n)
"""


def bench_filter(a: argparse.Namespace) -> dict:
    say("== filter: streaming LongMemEval JSON -> pairs, unique texts, qrels")
    files = {"quarter": (OUT / "data" / "m-quarter.json", QUARTER_ARGS),
             "M": (OUT / "data" / "m.json", M_ARGS)}
    results = {}
    for label, (path, args) in files.items():
        if a.only and label not in a.only:
            continue
        record = generate(path, args)
        size = path.stat().st_size
        warm(path)
        dest = OUT / f"filter-{label}"
        bare = run_time_v([PYTHON, "-c", BARE_IJSON, path], dest / "bare-ijson.log") if a.bare else None
        stats, summary = run_filter(path, dest)
        results[label] = {"file": str(path), "bytes": size, "generator": args,
                          "generate_s": record["generate_s"], "filter": stats, "bare_ijson": bare,
                          "summary": summary}
    rows = []
    for label, r in results.items():
        size, f, b = r["bytes"], r["filter"], r["bare_ijson"]
        rows.append([label, f"{size / MB:.0f}", f"{f['wall_s']:.1f}", f"{size / MB / f['wall_s']:.1f}",
                     f"{f['peak_rss_bytes'] / 2**20:.0f}", f"{f['peak_rss_bytes'] / size:.3f}",
                     f"{b['wall_s']:.1f}" if b else "-",
                     f"{size / MB / b['wall_s']:.1f}" if b else "-",
                     f"{b['peak_rss_bytes'] / 2**20:.0f}" if b else "-",
                     r["summary"]["unique_texts"], r["summary"]["session_slots"]])
    table(rows, ["file", "MB", "filter s", "MB/s", "peak RSS MiB", "RSS/size", "bare ijson s",
                 "ijson MB/s", "ijson RSS MiB", "unique texts", "session slots"])
    if "M" in results:
        s = results["M"]["summary"]
        say(f"  dedup factor (M): session_slots / unique_texts = {s['session_slots']} / "
            f"{s['unique_texts']} = {s['session_slots'] / s['unique_texts']:.1f}")
    save("filter", {"results": results})
    return results


# ------------------------------------------------------------------ 2. embed


def bench_bare_embed(a: argparse.Namespace) -> None:
    """(internal) the bare fastembed loop, run in its own process like the harness."""
    t0 = time.perf_counter()
    import numpy as np
    import pyarrow.parquet as pq
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType
    t_import = time.perf_counter()
    table = pq.read_table(a.texts)
    texts = table.column("text").to_pylist()
    ids = table.column("text_id").to_pylist()
    TextEmbedding.add_custom_model(
        model="local/all-MiniLM-L6-v2", pooling=PoolingType.MEAN, normalization=True,
        sources=ModelSource(hf="local/all-MiniLM-L6-v2"), dim=384, model_file=a.file)
    model = TextEmbedding("local/all-MiniLM-L6-v2", specific_model_path=str(a.model_dir),
                          threads=a.threads)
    t_load = time.perf_counter()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # as the harness length-sorts
    vectors = np.stack(list(model.embed([texts[i] for i in order], batch_size=a.batch_size)))
    t_embed = time.perf_counter()
    np.save(a.out, vectors)
    (a.out.with_suffix(".ids.json")).write_text(json.dumps([ids[i] for i in order]))
    print(json.dumps({"import_s": t_import - t0, "load_s": t_load - t_import,
                      "embed_s": t_embed - t_load, "texts": len(texts)}))


def bench_embed(a: argparse.Namespace) -> dict:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    say(f"== embed: vipune-eval embed vs a bare fastembed loop ({a.texts} texts, MiniLM-L6 ONNX, "
        f"threads {a.threads}, batch {a.batch_size})")
    texts_path = OUT / "filter-M" / "texts.parquet"
    summary_path = OUT / "filter-M" / "summary.json"
    if not texts_path.exists():
        raise SystemExit("run `benchmarks/run.py filter` first (embed samples the M-sized filter output)")
    dest = OUT / "embed"
    dest.mkdir(parents=True, exist_ok=True)
    all_texts = pq.read_table(texts_path)
    rng = random.Random(0)
    rows = sorted(rng.sample(range(all_texts.num_rows), a.texts))
    sub = all_texts.take(pa.array(rows))
    subset = dest / f"texts-{a.texts}.parquet"
    pq.write_table(sub, subset)
    chars = [len(t) for t in sub.column("text").to_pylist()]
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(MINILM / "tokenizer.json"))
    tok.no_truncation()
    tokens = [len(e.ids) for e in tok.encode_batch(sub.column("text").to_pylist())]
    say(f"  sample: {a.texts} texts, median {sorted(chars)[len(chars) // 2]} chars, "
        f"median {sorted(tokens)[len(tokens) // 2]} tokens, {sum(t > 512 for t in tokens)} over 512")

    harness_out = dest / "harness.parquet"
    bare_out = dest / "bare.npy"
    harness_cmd = ["vipune-eval", "embed", "--texts", subset, "--model-dir", MINILM,
                   "--file", "model.onnx", "--pooling", "mean", "--shard", 0, "--shards", 1,
                   "--threads", a.threads, "--batch-size", a.batch_size, "--out", harness_out,
                   "--model-fingerprint", model_fingerprint(dest, MINILM)]
    bare_cmd = [PYTHON, __file__, "_bare-embed", "--texts", subset, "--model-dir", MINILM,
                "--file", "model.onnx", "--threads", a.threads, "--batch-size", a.batch_size,
                "--out", bare_out]
    runs = []
    for rep in range(a.repeats):
        for name, cmd in (("bare", bare_cmd), ("harness", harness_cmd)):
            log = dest / f"{name}-{rep}.log"
            if a.reuse and log.with_suffix(".time").exists():  # figures of an earlier invocation
                stats = parse_time_v(log.with_suffix(".time"))
            else:
                stats = run_time_v(cmd, log)
            if name == "bare":
                stats["inner"] = json.loads((dest / f"{name}-{rep}.log").read_text()
                                            .split("--- stdout\n")[1].split("\n--- stderr")[0])
            stats["name"], stats["rep"] = name, rep
            runs.append(stats)
            say(f"  {name} (rep {rep}): {stats['wall_s']:.1f} s wall, {a.texts / stats['wall_s']:.2f} texts/s, "
                f"peak RSS {stats['peak_rss_bytes'] / 2**20:.0f} MiB")
    # the two must agree: same texts, same model, same recipe
    h = pq.read_table(harness_out)
    hv = dict(zip(h.column("text_id").to_pylist(),
                  np.asarray(h.column("embedding").combine_chunks().values).reshape(-1, 384)))
    bv = np.load(bare_out)
    bids = json.loads(bare_out.with_suffix(".ids.json").read_text())
    max_diff = float(max(np.abs(hv[i] - v).max() for i, v in zip(bids, bv)))
    bare_wall = sum(r["wall_s"] for r in runs if r["name"] == "bare") / a.repeats
    harness_wall = sum(r["wall_s"] for r in runs if r["name"] == "harness") / a.repeats
    inner = sum(r["inner"]["embed_s"] for r in runs if r["name"] == "bare") / a.repeats
    summary = filter_summary(summary_path.parent)
    result = {
        "texts": a.texts, "threads": a.threads, "batch_size": a.batch_size, "model": str(MINILM),
        "median_tokens": sorted(tokens)[len(tokens) // 2], "runs": runs,
        "bare_texts_per_s": a.texts / bare_wall, "harness_texts_per_s": a.texts / harness_wall,
        "bare_embed_only_texts_per_s": a.texts / inner,
        "overhead_ratio": harness_wall / bare_wall, "max_abs_vector_diff": max_diff,
        "dedup": {"session_slots": summary["session_slots"], "unique_texts": summary["unique_texts"],
                  "factor": summary["session_slots"] / summary["unique_texts"]},
    }
    table([["bare fastembed loop (process)", f"{bare_wall:.1f}", f"{a.texts / bare_wall:.2f}"],
           ["bare loop, embed() only", f"{inner:.1f}", f"{a.texts / inner:.2f}"],
           ["vipune-eval embed (process)", f"{harness_wall:.1f}", f"{a.texts / harness_wall:.2f}"]],
          ["", "wall s", "texts/s"])
    say(f"  overhead ratio harness/bare (whole process) = {harness_wall / bare_wall:.3f}; "
        f"max |Δ| between their vectors = {max_diff:.2e}")
    d = result["dedup"]
    say(f"  dedup factor of the M-sized file: {d['session_slots']} session slots / {d['unique_texts']} "
        f"unique texts = {d['factor']:.1f}")
    if summary["unique_texts"]:
        est = summary["unique_texts"] / result["harness_texts_per_s"]
        say(f"  at this rate, embedding all {summary['unique_texts']} unique texts of the M-sized file "
            f"would take {est / 3600:.1f} h on this machine with MiniLM (bge-small: ~2x)")
        result["m_full_embed_hours_estimate"] = est / 3600
    save("embed", result)
    return result


# ------------------------------------------------------------------ 3. search


def search_setup() -> dict:
    """An M-like haystack count with short texts: filtered, embedded with the tiny model."""
    data = OUT / "data" / "search.json"
    record = generate(data, SEARCH_ARGS)
    dest = OUT / "search"
    filt = dest / "filter"
    if not (filt / "summary.json").exists():
        say("  filtering ...")
        run_filter(data, filt)
    model = tiny_model()
    emb = dest / "embed" / "shard-0-of-1.parquet"
    if not emb.exists():
        say("  embedding with the tiny model ...")
        seconds, _ = run(["vipune-eval", "embed", "--texts", filt / "texts.parquet", "--model-dir", model,
                          "--file", "model.onnx", "--pooling", "mean", "--shard", 0, "--shards", 1,
                          "--threads", 2, "--batch-size", 4, "--out", emb,
                          "--model-fingerprint", model_fingerprint(dest, model)], log=dest / "embed.log")
        say(f"  embedded in {seconds:.0f} s")
    home = dest / "vipune-home"
    if not home.exists():
        run(["vipune-eval", "vipune-home", "--model-dir", model, "--file", "model.onnx",
             "--repo-id", BGE_REPO_ID, "--revision", BGE_REVISION, "--out", home])
    binary = fake_vipune(dest / "bin")
    from vipune_eval.sources import binary_fingerprint
    fp = binary_fingerprint(binary, dest / "fingerprint-home", 60, dest / "cache")
    fp_path = dest / "vipune-fp.json"
    fp_path.write_text(json.dumps(fp))
    return {"data": data, "record": record, "filter": filt, "embeddings": emb, "home": home,
            "binary": binary, "fingerprint": fp_path}


def bench_search(a: argparse.Namespace) -> dict:
    say("== search: vipune lane (harness vs bare binary calls) and search-reference over 470 personas")
    s = search_setup()
    dest = OUT / "search"
    filt = s["filter"]
    common = ["--rows", filt / "rows.parquet", "--texts", filt / "texts.parquet",
              "--embeddings", s["embeddings"]]
    summary = filter_summary(filt)
    say(f"  data: {summary['pairs']} pairs, {summary['session_slots'] / summary['pairs']:.0f} sessions per "
        f"haystack, {summary['unique_texts']} unique texts, {s['record']['bytes'] / MB:.0f} MB")

    # --- the vipune lane on one shard vs the same binary calls made directly
    shards = a.vipune_shards
    from vipune_eval.persona import personas_of_shard
    from vipune_eval.vipune import isolated_env
    from vipune_eval.vipune_lane import import_lines
    personas = list(personas_of_shard(filt / "rows.parquet", filt / "texts.parquet", [s["embeddings"]],
                                      0, shards))
    bare_dir = dest / "bare"
    shutil.rmtree(bare_dir, ignore_errors=True)
    jobs = []
    for i, p in enumerate(personas):  # prepared beforehand, not timed
        folder = bare_dir / f"p{i}"
        folder.mkdir(parents=True)
        (folder / "import.jsonl").write_text("\n".join(import_lines(p)) + "\n", encoding="utf-8")
        jobs.append((folder, p))
    venv = isolated_env(bare_dir / "home", s["home"].resolve())

    def bare_pass() -> dict:
        imp = srch = 0.0
        for folder, p in jobs:
            db = folder / "memories.db"
            db.unlink(missing_ok=True)
            t, proc = run([s["binary"], "--db-path", db, "--json", "import", folder / "import.jsonl"], env=venv)
            imp += t
            assert json.loads(proc.stdout)["inserted"] == len(p.row_ids), proc.stdout
            for arm in ("--hybrid", "--no-hybrid"):  # the lane runs both (vipune, vipune-semantic)
                t, _ = run([s["binary"], "--db-path", db, f"--project={p.question_id}", "--json", "search",
                            arm, "--recency", 0, "--limit", 10, "--no-touch", "--", p.question], env=venv)
                srch += t
        return {"import_s": imp, "search_s": srch, "total_s": imp + srch}

    def harness_pass(rep: int) -> dict:
        cache = dest / "vipune-cache"  # finished personas are cached: start each pass empty
        shutil.rmtree(cache, ignore_errors=True)
        return run_time_v(["vipune-eval", "search-vipune", *common, "--shard", 0, "--shards", shards,
                           "--limit", 10, "--depth", 10, "--binary", s["binary"], "--fingerprint", s["fingerprint"],
                           "--hf-home", s["home"], "--threads", 1, "--timeout", 300, "--tmp", dest / "tmp",
                           "--on-error", "stop", "--cache", cache, "--status-out", dest / "vipune-shard.status.json",
                           "--out", dest / "vipune-shard.run", "--semantic-out", dest / "vipune-shard.semantic.run"],
                          dest / f"search-vipune-{rep}.log")

    n = len(personas)
    lane = []
    for rep in range(a.repeats):
        h = harness_pass(rep)
        b = bare_pass()
        lane.append({"harness": h, "bare": b})
        say(f"  rep {rep}: harness {h['wall_s']:.1f} s, bare calls {b['total_s']:.1f} s "
            f"(import {b['import_s']:.1f} + search {b['search_s']:.1f}) for {n} personas")
    hw = sum(r["harness"]["wall_s"] for r in lane) / len(lane)
    bw = sum(r["bare"]["total_s"] for r in lane) / len(lane)
    table([["vipune-eval search-vipune (process)", f"{hw:.1f}", f"{1000 * hw / n:.0f}"],
           ["bare import+search calls", f"{bw:.1f}", f"{1000 * bw / n:.0f}"],
           ["harness overhead", f"{hw - bw:.1f}", f"{1000 * (hw - bw) / n:.0f}"]],
          ["", f"total s ({n} personas)", "ms / persona"])
    say(f"  ratio harness/bare = {hw / bw:.3f}")

    # --- the reference lane: all 470 personas, all five retrievers, one process
    outs = [dest / "reference" / f"{r}.run" for r in ("dense", "bm25", "bm25-or", "hybrid", "hybrid-or")]
    ref = run_time_v(["vipune-eval", "search-reference", *common, "--shard", 0, "--shards", 1,
                      "--limit", 10, "--depth", 10, "--retrievers", "dense", "bm25", "bm25-or", "hybrid", "hybrid-or",
                      "--outputs", *outs], dest / "search-reference.log")
    say(f"  search-reference, {summary['pairs']} personas, 5 retrievers, 1 process: {ref['wall_s']:.1f} s "
        f"({1000 * ref['wall_s'] / summary['pairs']:.0f} ms / persona), peak RSS "
        f"{ref['peak_rss_bytes'] / 2**20:.0f} MiB")
    result = {"data": SEARCH_ARGS, "pairs": summary["pairs"], "unique_texts": summary["unique_texts"],
              "vipune_lane": {"personas": n, "shard": f"0 of {shards}", "threads": 1, "runs": lane,
                              "harness_ms_per_persona": 1000 * hw / n, "bare_ms_per_persona": 1000 * bw / n,
                              "overhead_ms_per_persona": 1000 * (hw - bw) / n, "ratio": hw / bw},
              "reference": {"personas": summary["pairs"], **ref,
                            "ms_per_persona": 1000 * ref["wall_s"] / summary["pairs"]}}
    save("search", result)
    return result


# ------------------------------------------------------------------ 4/5. the workflow


def workflow_dir(name: str, data: Path, binary: Path, search_shards: int, expected: bool) -> Path:
    import yaml
    workdir = OUT / name
    workdir.mkdir(parents=True, exist_ok=True)
    config = {"dataset": {"path": str(data)},
              "model": {"path": str(tiny_model()), "file": "model.onnx"},
              "vipune": {"binary": str(binary)},
              "embed": {"shards": 4}, "search": {"shards": search_shards}}
    if not expected:
        config["dataset"]["expected"] = None
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    return workdir


def snakemake(workdir: Path, *args: object, label: str) -> tuple[float, str]:
    cmd = [PYTHON, "-m", "snakemake", "-s", (SNAPSHOT or REPO) / "Snakefile", "--directory", workdir,
           "--configfile", workdir / "config.yaml", *args]
    seconds, proc = run(cmd, log=workdir.parent / f"{workdir.name}-logs" / f"{label}.log", cwd=workdir.parent)
    out = proc.stdout + proc.stderr
    return seconds, out


def jobs_of(out: str) -> int | str:
    if "Nothing to be done" in out:
        return 0
    m = re.search(r"^total\s+(\d+)", out, re.M)
    return int(m[1]) if m else "?"


def bench_dag(a: argparse.Namespace) -> dict:
    say(f"== dag: snakemake dry run and no-op run, 470 pairs, embed.shards 4, search.shards {a.shards}")
    data = OUT / "data" / "dag.json"
    generate(data, DAG_ARGS)
    binary = fake_vipune(OUT / "dag-bin")
    results = {}
    for shards in a.shards:
        r = {}
        fresh = workflow_dir(f"dag-fresh-{shards}", data, binary, shards, expected=True)
        r["dry_run_s"], out = snakemake(fresh, "-n", "--cores", 2, label="dry")
        r["dry_run_jobs"] = jobs_of(out)
        say(f"  shards {shards}: dry run on a fresh directory (plans {r['dry_run_jobs']} jobs) {r['dry_run_s']:.1f} s")
        # one work directory for all shard counts: switching sharding reuses filter and embed
        workdir = workflow_dir("dag", data, binary, shards, expected=True)
        if shards in a.full:
            r["full_run_s"], out = snakemake(workdir, "--cores", 2, label=f"{shards}-full")
            r["full_run_jobs"] = jobs_of(out)
            r["dry_run_done_s"], out = snakemake(workdir, "-n", "--cores", 2, label=f"{shards}-dry-done")
            assert jobs_of(out) == 0, out[-2000:]
            r["noop_run_s"], out = snakemake(workdir, "--cores", 2, label=f"{shards}-noop")
            assert jobs_of(out) == 0, out[-2000:]
            say(f"  shards {shards}: full run {r['full_run_s']:.0f} s ({r['full_run_jobs']} jobs); "
                f"afterwards dry run {r['dry_run_done_s']:.1f} s, no-op run {r['noop_run_s']:.1f} s")
        else:
            r["dry_run_switch_s"], out = snakemake(workdir, "-n", "--cores", 2, label=f"{shards}-dry-switch")
            r["dry_run_switch_jobs"] = jobs_of(out)
            say(f"  shards {shards}: no full run; dry run after a complete run with other sharding "
                f"(plans {r['dry_run_switch_jobs']} jobs) {r['dry_run_switch_s']:.1f} s")
        results[shards] = r
    f = lambda r, k, fmt: format(r[k], fmt) if k in r else "-"
    rows = [[k, v["dry_run_jobs"], f(v, "dry_run_s", ".1f"), f(v, "full_run_s", ".0f"),
             f(v, "dry_run_done_s", ".1f"), f(v, "noop_run_s", ".1f"), f(v, "dry_run_switch_s", ".1f")]
            for k, v in results.items()]
    table(rows, ["search.shards", "jobs", "dry run fresh s", "full run s", "dry run done s",
                 "no-op run s", "dry run after switch s"])
    keys = list(results)
    if len(keys) == 2:
        x, y = keys
        say(f"  dry run (fresh) ratio {y}/{x} shards: {results[y]['dry_run_s'] / results[x]['dry_run_s']:.2f}")
    save("dag", {"data": DAG_ARGS, "results": results,
                 "snapshot": json.loads((SNAPSHOT / "SNAPSHOT.json").read_text()) if SNAPSHOT else None})
    return results


def bench_reruns(a: argparse.Namespace) -> dict:
    say("== reruns: cold run, run after the vipune binary changed, no-op run (470 pairs x 50 sessions)")
    data = OUT / "data" / "reruns.json"
    generate(data, RERUN_ARGS)
    shutil.rmtree(OUT / "reruns", ignore_errors=True)
    shutil.rmtree(OUT / "reruns-logs", ignore_errors=True)
    binary = fake_vipune(OUT / "reruns-bin")
    workdir = workflow_dir("reruns", data, binary, 8, expected=True)
    # Commit 3c27bd0's report.md writer formats None when *every* gold session is over 512 tokens
    # (as with these long sessions). Patch the frozen copy's formatting only, and say so.
    report_py = SNAPSHOT / "vipune_eval" / "report.py"
    buggy = "{split['untruncated_gold']:.3f} without\")"
    patched_report = False
    if buggy in report_py.read_text():
        report_py.write_text(report_py.read_text().replace(
            buggy, "{split['untruncated_gold'] if split['untruncated_gold'] is None else "
                   "format(split['untruncated_gold'], '.3f')} without\")"))
        patched_report = True
        say("  note: patched the snapshot's report.md formatting of untruncated_gold = None (crash in HEAD)")
    r = {}
    r["cold_s"], out = snakemake(workdir, "--cores", 2, label="cold")
    r["cold_jobs"] = jobs_of(out)
    say(f"  cold run: {r['cold_s']:.0f} s ({r['cold_jobs']} jobs)")
    with open(binary, "a") as handle:
        handle.write(f"# rebuilt {time.time()}\n")
    r["binary_changed_s"], out = snakemake(workdir, "--cores", 2, label="binary-changed")
    r["binary_changed_jobs"] = jobs_of(out)
    say(f"  after the binary changed: {r['binary_changed_s']:.0f} s ({r['binary_changed_jobs']} jobs)")
    r["noop_s"], out = snakemake(workdir, "--cores", 2, label="noop")
    r["noop_jobs"] = jobs_of(out)
    stage = {}
    for tsv in (workdir / "results" / "benchmarks").rglob("*.tsv"):
        rule = tsv.relative_to(workdir / "results" / "benchmarks").parts[0].removesuffix(".tsv")
        seconds = float(tsv.read_text().splitlines()[1].split("\t")[0])
        stage[rule] = stage.get(rule, 0.0) + seconds
    r["job_seconds_by_rule"] = stage
    table([["cold", r["cold_jobs"], f"{r['cold_s']:.1f}", "1.000"],
           ["binary changed", r["binary_changed_jobs"], f"{r['binary_changed_s']:.1f}",
            f"{r['binary_changed_s'] / r['cold_s']:.3f}"],
           ["no-op", r["noop_jobs"], f"{r['noop_s']:.1f}", f"{r['noop_s'] / r['cold_s']:.3f}"]],
          ["run", "jobs", "wall s", "/ cold"])
    say("  job seconds by rule (Snakemake benchmark files, last run of each job): "
        + ", ".join(f"{k} {v:.0f}" for k, v in sorted(stage.items())))
    save("reruns", {"data": RERUN_ARGS, "results": r, "snapshot_report_py_patched": patched_report,
                    "snapshot": json.loads((SNAPSHOT / "SNAPSHOT.json").read_text()) if SNAPSHOT else None})
    return r


# ------------------------------------------------------------------ 6. granularities, sweep, shard memory

# MiniLM-L6 and bge-small-en-v1.5 are both BERT encoders with hidden 384, intermediate 1536.
ENCODERS = {"MiniLM-L6": dict(layers=6, hidden=384, intermediate=1536),
            "bge-small-en-v1.5": dict(layers=12, hidden=384, intermediate=1536)}


def flops_per_token(layers: int, hidden: int, intermediate: int, seq: int) -> float:
    """Forward FLOPs per token of a BERT encoder at sequence length ``seq``: 2 x the matmul
    parameters (Q, K, V, output: 4 h^2; FFN: 2 h i) plus the attention scores (Q K^T) and the
    context (A V), 2 * seq * h each. Embeddings, layer norms, softmax and GELU are left out."""
    matmul = 4 * hidden * hidden + 2 * hidden * intermediate
    return layers * (2 * matmul + 4 * seq * hidden)


EMBED_CHILD = r'''
import sys, json, time, resource
from pathlib import Path
import pyarrow.parquet as pq
from vipune_eval.embed import load_model
from vipune_eval.tokens import count_tokens
texts_path, model_dir, threads, batch = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
texts = pq.read_table(texts_path).column("text").to_pylist()
tokens = count_tokens(model_dir, texts)
order = sorted(range(len(texts)), key=lambda i: tokens[i])  # length-sorted, as run_embed does
texts = [texts[i] for i in order]
t0 = time.perf_counter()
model = load_model(model_dir, "model.onnx", "mean", threads=threads)
t1 = time.perf_counter()
n = 0
for _ in model.embed(texts, batch_size=batch):
    n += 1
t2 = time.perf_counter()
print(json.dumps({"texts": n, "load_s": t1 - t0, "embed_s": t2 - t1,
                  "tokens_embedded": int(sum(min(int(t), 512) for t in tokens)),
                  "cpu_s": sum(resource.getrusage(resource.RUSAGE_SELF)[:2])}))
'''


def embed_child(texts: Path, threads: int, batch: int, log: Path) -> dict:
    """Embed ``texts`` (Parquet, column text) with MiniLM in a fresh process: texts/s of the
    embed loop only (model loaded), peak RSS of the whole process."""
    stats = run_time_v([PYTHON, "-c", EMBED_CHILD, texts, MINILM, threads, batch], log)
    inner = json.loads(log.read_text().split("--- stdout\n")[1].split("\n--- stderr")[0].strip().splitlines()[-1])
    return {**stats, **inner, "texts_per_s": inner["texts"] / inner["embed_s"],
            "tokens_per_s": inner["tokens_embedded"] / inner["embed_s"], "load": os.getloadavg()[0]}


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


GRANULARITIES = ("session", "turn", "chunk")


def bench_granularities(a: argparse.Namespace) -> dict:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from vipune_eval.tokens import count_tokens
    path, args = (OUT / "data" / "m.json", M_ARGS) if a.file == "M" else (OUT / "data" / "m-quarter.json", QUARTER_ARGS)
    say(f"== granularities: filter-rows per granularity on the {a.file} file, tokens, MiniLM texts/s")
    record = generate(path, args)
    warm(path)
    results: dict[str, dict] = {}
    for g in GRANULARITIES:
        dest = OUT / "granularities" / a.file / g
        dest.mkdir(parents=True, exist_ok=True)
        cmd = ["vipune-eval", "filter-rows", "--dataset", path, "--granularity", g,
               "--rows-out", dest / "rows.parquet", "--texts-out", dest / "texts.parquet"]
        if g == "chunk":
            cmd += ["--tokenizer", MINILM / "tokenizer.json"]
        stamp = dest / "filter.json"
        if a.reuse and stamp.exists():
            stats = json.loads(stamp.read_text())
        else:
            load = uptime()
            stats = {**run_time_v(cmd, dest / "filter-rows.log"), "uptime": load}
            rows = pq.read_metadata(dest / "rows.parquet").num_rows
            texts = pq.read_table(dest / "texts.parquet")
            t0 = time.perf_counter()
            tokens = count_tokens(MINILM, texts.column("text").to_pylist())
            stats["count_tokens_s"] = time.perf_counter() - t0
            stats.update(pairs=rows, unique_texts=texts.num_rows, tokens=int(tokens.sum()),
                         tokens_embedded=int(np.minimum(tokens, 512).sum()),
                         over_512=int((tokens > 512).sum()), median_tokens=int(np.median(tokens)),
                         row_slots=int(pq.read_table(dest / "rows.parquet", columns=["row_keys"])
                                       .column("row_keys").combine_chunks().value_lengths().to_numpy().sum()))
            np.save(dest / "tokens.npy", tokens)
            stamp.write_text(json.dumps(stats, indent=2))
            del texts
        results[g] = {"filter_rows": stats}
        say(f"  {g}: filter-rows {stats['wall_s']:.1f} s, peak RSS {stats['peak_rss_bytes'] / 2**20:.0f} MiB; "
            f"{stats['unique_texts']} unique texts, {stats['tokens']} tokens, {stats['tokens_embedded']} embedded")
    # a fixed-seed sample of each granularity's unique texts, embedded interleaved
    samples = {}
    for g in GRANULARITIES:
        dest = OUT / "granularities" / a.file / g
        texts = pq.read_table(dest / "texts.parquet")
        rng = random.Random(0)
        pick = sorted(rng.sample(range(texts.num_rows), min(a.texts, texts.num_rows)))
        sample = dest / f"sample-{a.texts}.parquet"
        pq.write_table(texts.take(pa.array(pick)), sample)
        samples[g] = sample
    runs: dict[str, list[dict]] = {g: [] for g in GRANULARITIES}
    for rep in range(a.repeats):
        order = GRANULARITIES if rep % 2 == 0 else GRANULARITIES[::-1]
        for g in order:
            r = embed_child(samples[g], a.threads, a.batch_size, OUT / "granularities" / a.file / g / f"embed-{rep}.log")
            r["uptime"] = uptime()
            runs[g].append(r)
            say(f"  embed {g} (rep {rep}): {r['texts']} texts in {r['embed_s']:.1f} s = {r['texts_per_s']:.2f} texts/s, "
                f"{r['tokens_per_s']:.0f} tokens/s, peak RSS {r['peak_rss_bytes'] / 2**20:.0f} MiB, load {r['load']:.2f}")
    scale = 1.0 if a.file == "M" else a.scale
    ratio_bge = flops_per_token(**ENCODERS["bge-small-en-v1.5"], seq=512) / flops_per_token(**ENCODERS["MiniLM-L6"], seq=512)
    rows = []
    for g in GRANULARITIES:
        s = results[g]["filter_rows"]
        tps = sum(r["texts_per_s"] for r in runs[g]) / len(runs[g])
        toks = sum(r["tokens_per_s"] for r in runs[g]) / len(runs[g])
        hours = scale * s["unique_texts"] / tps / 3600
        results[g].update(embed_runs=runs[g], texts_per_s=tps, tokens_per_s=toks,
                          hours_minilm=hours, hours_bge_small=hours * ratio_bge)
        rows.append([g, s["unique_texts"], s["row_slots"], f"{s['tokens'] / 1e6:.1f}", f"{s['tokens_embedded'] / 1e6:.1f}",
                     s["median_tokens"], f"{s['wall_s']:.0f}", f"{s['peak_rss_bytes'] / 2**20:.0f}",
                     f"{tps:.2f}", f"{toks:.0f}", f"{hours:.1f}", f"{hours * ratio_bge:.1f}"])
    table(rows, ["granularity", "unique texts", "row slots", "tokens M", "embedded M", "median tok",
                 "filter-rows s", "RSS MiB", "texts/s", "tokens/s", "h MiniLM", "h bge-small"])
    base = results["session"]
    ratios = {}
    for g in ("turn", "chunk"):
        r = results[g]
        ratios[f"{g}/session"] = {
            "texts": r["filter_rows"]["unique_texts"] / base["filter_rows"]["unique_texts"],
            "tokens": r["filter_rows"]["tokens"] / base["filter_rows"]["tokens"],
            "tokens_embedded": r["filter_rows"]["tokens_embedded"] / base["filter_rows"]["tokens_embedded"],
            "time": r["hours_minilm"] / base["hours_minilm"]}
    table([[k, *(f"{v[x]:.2f}" for x in ("texts", "tokens", "tokens_embedded", "time"))] for k, v in ratios.items()],
          ["ratio", "texts", "tokens", "tokens embedded", "est. time"])
    say(f"  bge-small / MiniLM FLOPs per token (seq 512): {ratio_bge:.2f}")
    save("granularities", {"file": str(path), "generator": args, "bytes": record["bytes"], "scale": scale,
                           "sample_texts": a.texts, "threads": a.threads, "batch_size": a.batch_size,
                           "flops_per_token": {k: {s: flops_per_token(**v, seq=s) for s in (32, 128, 512)}
                                               for k, v in ENCODERS.items()},
                           "bge_over_minilm": ratio_bge, "results": results, "ratios": ratios})
    return results


MATMUL_CHILD = r'''
import json, time, numpy as np
n = 2048
a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
b = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
a @ b
best = 1e9
for _ in range(8):
    t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t)
print(json.dumps({"n": n, "best_s": best, "gflops": 2 * n ** 3 / best / 1e9}))
'''


def bench_sweep(a: argparse.Namespace) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq
    say(f"== sweep: MiniLM texts/s over batch {a.batches} x threads {a.threads}, long and short texts")
    src = OUT / "granularities" / "M" / "session" / "texts.parquet"
    turns = OUT / "granularities" / "M" / "turn" / "texts.parquet"
    if not src.exists() or not turns.exists():
        raise SystemExit("run `benchmarks/run.py granularities` first (the sweep samples its texts)")
    dest = OUT / "sweep"
    dest.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    sessions = pq.read_table(src)
    long_texts = [sessions.column("text")[i].as_py() for i in rng.sample(range(sessions.num_rows), a.long)]
    turn_texts = pq.read_table(turns).column("text")
    short = []
    for i in rng.sample(range(len(turn_texts)), a.short):  # 15-30 words of a turn: ~20-40 tokens
        words = turn_texts[i].as_py().split()
        short.append(" ".join(words[:rng.randint(15, 30)]))
    kinds = {"long (512 tokens)": dest / "long.parquet", "short": dest / "short.parquet"}
    pq.write_table(pa.table({"text": long_texts}), kinds["long (512 tokens)"])
    pq.write_table(pa.table({"text": short}), kinds["short"])
    configs = [(k, b, t) for k in kinds for t in a.threads for b in a.batches]
    runs: dict[str, list[dict]] = {}
    first = 0
    if a.append and (OUT / "sweep.json").exists():  # add reps to an earlier invocation's
        runs = json.loads((OUT / "sweep.json").read_text())["runs"]
        first = max(len(v) for v in runs.values())
    for rep in range(first, first + a.repeats):
        order = configs[:]
        random.Random(rep).shuffle(order)  # interleaved: no config always runs at the same moment
        for kind, b, t in order:
            key = f"{kind}|{b}|{t}"
            r = embed_child(kinds[kind], t, b, dest / f"{kind.split()[0]}-b{b}-t{t}-{rep}.log")
            r["uptime"] = uptime()
            runs.setdefault(key, []).append(r)
            say(f"  {kind} batch {b:2d} threads {t} (rep {rep}): {r['texts_per_s']:7.2f} texts/s, "
                f"{r['tokens_per_s']:6.0f} tokens/s, peak RSS {r['peak_rss_bytes'] / 2**20:4.0f} MiB, load {r['load']:.2f}")
    # the machine's float32 matmul peak at the same thread counts
    peak = {}
    for t in a.threads:
        e = {**env(), "OMP_NUM_THREADS": str(t), "OPENBLAS_NUM_THREADS": str(t), "MKL_NUM_THREADS": str(t)}
        best = max((json.loads(run([PYTHON, "-c", MATMUL_CHILD], env=e)[1].stdout) for _ in range(2)),
                   key=lambda r: r["gflops"])
        say(f"  numpy float32 2048x2048 matmul, {t} thread(s): {best['gflops']:.1f} GFLOP/s")
        if first:  # the peak is the best ever seen: other people's load only lowers it
            old = json.loads((OUT / "sweep.json").read_text())["matmul_peak"].get(str(t))
            if old and old["gflops"] > best["gflops"]:
                best = old
        peak[t] = best
    summary: dict[str, dict] = {}
    for key, rs in runs.items():
        kind, b, t = key.split("|")
        n = len(rs)
        med_tokens = rs[0]["tokens_embedded"] / rs[0]["texts"]
        fpt = flops_per_token(**ENCODERS["MiniLM-L6"], seq=round(med_tokens))
        tps = sum(r["texts_per_s"] for r in rs) / n
        toks = sum(r["tokens_per_s"] for r in rs) / n
        summary[key] = {"kind": kind, "batch": int(b), "threads": int(t), "texts_per_s": tps, "tokens_per_s": toks,
                        "texts_per_s_reps": [r["texts_per_s"] for r in rs],
                        "peak_rss_mib": max(r["peak_rss_bytes"] for r in rs) / 2**20,
                        "mean_tokens": med_tokens, "gflops": toks * fpt / 1e9,
                        "fraction_of_peak": toks * fpt / 1e9 / peak[int(t)]["gflops"]}
    best = {}
    for kind in kinds:
        mine = {k: v for k, v in summary.items() if v["kind"] == kind}
        bk = max(mine, key=lambda k: mine[k]["texts_per_s"])
        best[kind] = bk
        for k, v in mine.items():
            v["ratio_to_best"] = v["texts_per_s"] / mine[bk]["texts_per_s"]
        rows = [[v["batch"], v["threads"], f"{v['texts_per_s']:.2f}", "/".join(f"{x:.2f}" for x in v["texts_per_s_reps"]),
                 f"{v['tokens_per_s']:.0f}", f"{v['ratio_to_best']:.2f}", f"{v['peak_rss_mib']:.0f}",
                 f"{v['gflops']:.1f}", f"{v['fraction_of_peak']:.2f}"]
                for v in sorted(mine.values(), key=lambda v: (v["threads"], v["batch"]))]
        say(f"  {kind}: {len(long_texts) if kind.startswith('long') else len(short)} texts, "
            f"mean {mine[bk]['mean_tokens']:.0f} tokens")
        table(rows, ["batch", "threads", "texts/s", "reps", "tokens/s", "/ best", "peak RSS MiB", "GFLOP/s", "/ peak"])
        d = summary.get(f"{kind}|4|2")
        say(f"  best for {kind}: batch {mine[bk]['batch']}, threads {mine[bk]['threads']} "
            f"({mine[bk]['texts_per_s']:.2f} texts/s); default batch 4 threads 2: "
            f"{d['ratio_to_best']:.2f} of best" if d else "")
    save("sweep", {"batches": a.batches, "threads": a.threads, "repeats": first + a.repeats,
                   "texts": {"long": len(long_texts), "short": len(short)}, "matmul_peak": peak,
                   "configs": summary, "best": best, "runs": runs})
    return summary


# LongMemEval_M-like personas of ~11 000 turn rows (500 sessions x 22 turns of 150 words):
# the shard-memory bench. 16 pairs: shards 8/4/2 put 2/4/8 personas in shard 0.
SHARD_MEM_ARGS = dict(instances=16, abstention=0, sessions=500, filler_pool=2000, turns=22,
                      words_per_turn=150, seed=5)


def export_ref(ref: str, dest: Path) -> dict:
    """The package (vipune_eval) at ``ref``, exported to ``dest`` for PYTHONPATH (see snapshot())."""
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", ref], capture_output=True, text=True,
                            check=True).stdout.strip()
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    subprocess.run(f"git -C {REPO} archive {commit} vipune_eval | tar -x -C {dest}", shell=True, check=True)
    (dest / "sitecustomize.py").write_text(
        "import sys\nsys.meta_path[:] = [f for f in sys.meta_path\n"
        "                   if not getattr(f, '__module__', '').startswith('__editable__')]\n")
    return {"ref": ref, "commit": commit}


def random_embeddings(texts: Path, out: Path, seed: int = 0) -> None:
    """An embedding shard with random unit float32 384-d vectors in embed.py's exact schema
    (model key = the hash of a stand-in fingerprint: search does not check it)."""
    import hashlib
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from vipune_eval.embed import embeddings_schema
    if out.exists():
        return
    ids = pq.read_table(texts, columns=["text_id"]).column("text_id")
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((len(ids), 384), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    key = hashlib.sha256(b"random-vectors-benchmark").hexdigest()[:16]
    pq.write_table(pa.table({"text_id": ids,
                             "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 384),
                             "tokens": pa.array(np.full(len(ids), 100, np.int32)),
                             "truncated": pa.array(np.zeros(len(ids), bool))},
                            schema=embeddings_schema(384, key)), out)


def search_cmds(lane: str, filt: Path, emb: Path, shard: int, shards: int, dest: Path, s: dict) -> list:
    common = ["--rows", filt / "rows.parquet", "--texts", filt / "texts.parquet", "--embeddings", emb,
              "--shard", shard, "--shards", shards, "--limit", 1000, "--depth", 10]
    if lane == "reference":
        retr = ["dense", "bm25", "bm25-or", "hybrid", "hybrid-or"]
        return ["vipune-eval", "search-reference", *common, "--rank-all", "--retrievers", *retr,
                "--outputs", *[dest / f"{r}.run" for r in retr]]
    shutil.rmtree(dest / "cache", ignore_errors=True)
    return ["vipune-eval", "search-vipune", *common, "--binary", s["binary"], "--fingerprint", s["fingerprint"],
            "--hf-home", s["home"], "--threads", 1, "--timeout", 600, "--on-error", "stop",
            "--cache", dest / "cache", "--tmp", dest / "tmp", "--out", dest / "vipune.run",
            "--semantic-out", dest / "semantic.run", "--status-out", dest / "status.json"]


def bench_shard_memory(a: argparse.Namespace) -> dict:
    global SNAPSHOT
    import pyarrow.parquet as pq
    refs = a.refs or [subprocess.run(["git", "-C", REPO, "merge-base", "HEAD", "main"], capture_output=True,
                                     text=True, check=True).stdout.strip(), "main"]
    say(f"== shard-memory: peak RSS of one search shard, {a.personas} personas, refs {refs}")
    data = OUT / "data" / "shard-memory.json"
    generate(data, SHARD_MEM_ARGS)
    base = OUT / "shard-memory"
    filt = base / "filter"
    if not (filt / "rows.parquet").exists():
        say("  filter-rows (turn) ...")
        run(["vipune-eval", "filter-rows", "--dataset", data, "--granularity", "turn",
             "--rows-out", filt / "rows.parquet", "--texts-out", filt / "texts.parquet"], log=base / "filter-rows.log")
    emb = filt / "embeddings.parquet"
    random_embeddings(filt / "texts.parquet", emb)
    rows = pq.read_table(filt / "rows.parquet", columns=["row_keys"]).column("row_keys").combine_chunks()
    per_persona = rows.value_lengths().to_numpy()
    say(f"  {len(per_persona)} personas, {per_persona.min()}-{per_persona.max()} rows each, "
        f"{pq.read_metadata(filt / 'texts.parquet').num_rows} unique texts")
    binary = fake_vipune(base / "bin")
    from vipune_eval.sources import sha256_file
    fp = base / "vipune-fp.json"
    fp.write_text(json.dumps({"sha256": sha256_file(binary), "id": "fake"}))
    home = base / "hf-home"  # the fake embeds the question with the tiny model (384-d)
    if not home.exists():
        run(["vipune-eval", "vipune-home", "--model-dir", tiny_model(), "--file", "model.onnx",
             "--repo-id", BGE_REPO_ID, "--revision", BGE_REVISION, "--out", home])
    s = {"binary": binary, "fingerprint": fp, "home": home}
    exported = {}
    for i, ref in enumerate(refs):
        exported[ref] = export_ref(ref, base / f"ref-{i}")
        say(f"  ref {ref} = {exported[ref]['commit'][:12]}")
    shards_of = {n: len(per_persona) // n for n in a.personas}
    results: list[dict] = []
    earlier = json.loads((OUT / "shard-memory.json").read_text()) if (OUT / "shard-memory.json").exists() else {}
    if a.skip_personas:  # only the M turn shard this time: keep the persona figures of before
        results, a.personas = earlier.get("results", []), []
    for rep, n, lane in [(rep, n, lane) for rep in range(a.repeats) for n in a.personas for lane in a.lanes]:
            for i, ref in enumerate(refs):  # the refs side by side for each configuration
                SNAPSHOT = base / f"ref-{i}"
                dest = base / "runs" / f"{lane}-{n}-ref{i}"
                dest.mkdir(parents=True, exist_ok=True)
                load = uptime()
                stats = run_time_v(search_cmds(lane, filt, emb, 0, shards_of[n], dest, s), dest / "log")
                r = {"ref": ref, "commit": exported[ref]["commit"], "lane": lane, "personas": n, "rep": rep,
                     "shard": f"0 of {shards_of[n]}", "rows": int(per_persona[0::shards_of[n]].sum()),
                     **stats, "uptime": load}
                results.append(r)
                say(f"  {lane} {n} personas ({r['rows']} rows) ref {ref[:12]}: {stats['wall_s']:.1f} s, "
                    f"peak RSS {stats['peak_rss_bytes'] / 2**20:.0f} MiB")
    SNAPSHOT = None
    rows_ = []
    for n in a.personas:
        for lane in a.lanes:
            mine = [[r for r in results if r["personas"] == n and r["lane"] == lane and r["ref"] == ref]
                    for ref in refs]
            rss = [max(r["peak_rss_bytes"] for r in m) / 2**20 for m in mine]  # the worst rep
            rows_.append([lane, n, mine[0][0]["rows"],
                          *("/".join(f"{r['peak_rss_bytes'] / 2**20:.0f}" for r in m) for m in mine),
                          *(f"{m[0]['wall_s']:.1f}" for m in mine),
                          f"{rss[-1] / rss[0]:.2f}" if len(rss) > 1 else "-"])
    table(rows_, ["lane", "personas", "rows", *(f"RSS MiB {r[:10]} (reps)" for r in refs),
                  *(f"s {r[:10]}" for r in refs), "max RSS B/A"])
    m_turn = earlier.get("m_turn") or []  # figures of an earlier invocation, replaced per variant
    if a.m_turn:
        new = shard_memory_m_turn(refs, exported, s, a.lanes, a.m_turn_embed_shards)
        done = {(r["lane"], r["commit"], r.get("embed_shards", 1)) for r in new}
        m_turn = [r for r in m_turn if (r["lane"], r["commit"], r.get("embed_shards", 1)) not in done] + new
    save("shard-memory", {"data": SHARD_MEM_ARGS, "refs": exported, "results": results, "m_turn": m_turn})
    return {"results": results, "m_turn": m_turn}


def shard_memory_m_turn(refs: list[str], exported: dict, s: dict, lanes: list[str],
                        embed_shards: list[int]) -> list[dict]:
    """Shard 0 of 8 of the M-like turn view (the granularities bench's filter-rows output) with
    random vectors: does one search job fit the slurm profile's mem_mb 1500?"""
    global SNAPSHOT
    filt = OUT / "granularities" / "M" / "turn"
    if not (filt / "rows.parquet").exists():
        say("  no M turn view (run granularities first): skipped")
        return []
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from vipune_eval.embed import shard_of
    emb = OUT / "shard-memory" / "m-turn-embeddings.parquet"
    random_embeddings(filt / "texts.parquet", emb)
    files = {1: [emb]}
    for n in embed_shards:  # the same vectors split as `embed.shards: n` splits them
        if n == 1:
            continue
        files[n] = [emb.with_name(f"m-turn-emb-{k}-of-{n}.parquet") for k in range(n)]
        if not all(f.exists() for f in files[n]):
            t = pq.read_table(emb)
            which = pa.array([shard_of(x, n) for x in t.column("text_id").to_pylist()])
            for k, f in enumerate(files[n]):
                pq.write_table(t.filter(pc.equal(which, k)), f)
            del t
    out = []
    for n, lane in [(n, lane) for n in embed_shards for lane in lanes]:
        for i, ref in enumerate(refs):
            SNAPSHOT = OUT / "shard-memory" / f"ref-{i}"
            dest = OUT / "shard-memory" / "runs" / f"m-turn-{lane}-ref{i}-emb{n}"
            dest.mkdir(parents=True, exist_ok=True)
            load = uptime()
            cmd = search_cmds(lane, filt, "EMB", 0, 8, dest, s)
            at = cmd.index("EMB")
            cmd[at:at + 1] = files[n]
            stats = run_time_v(cmd, dest / "log")
            r = {"ref": ref, "commit": exported[ref]["commit"], "lane": lane, "shard": "0 of 8", **stats,
                 "embed_shards": n, "uptime": load, "fits_1500_mb": stats["peak_rss_bytes"] <= 1500 * 2**20}
            out.append(r)
            say(f"  M turn shard 0 of 8, {n} embedding file(s), {lane}, ref {ref[:12]}: {stats['wall_s']:.0f} s, "
                f"peak RSS {stats['peak_rss_bytes'] / 2**20:.0f} MiB (fits 1500 MB: {r['fits_1500_mb']})")
    SNAPSHOT = None
    return out


# ------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="bench", required=True)
    sub.add_parser("info").set_defaults(func=bench_info)
    s = sub.add_parser("filter")
    s.add_argument("--only", nargs="*", choices=["quarter", "M"], help="only these files")
    s.add_argument("--no-bare", dest="bare", action="store_false", help="skip the bare ijson pass")
    s.set_defaults(func=bench_filter)
    s = sub.add_parser("embed")
    s.add_argument("--texts", type=int, default=400)
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--batch-size", type=int, default=4)  # the harness default (see sweep)
    s.add_argument("--repeats", type=int, default=1)
    s.add_argument("--reuse", action="store_true", help="reuse the timings of an earlier invocation")
    s.set_defaults(func=bench_embed)
    s = sub.add_parser("_bare-embed")
    s.add_argument("--texts", type=Path)
    s.add_argument("--model-dir", type=Path)
    s.add_argument("--file")
    s.add_argument("--threads", type=int)
    s.add_argument("--batch-size", type=int)
    s.add_argument("--out", type=Path)
    s.set_defaults(func=bench_bare_embed)
    s = sub.add_parser("search")
    s.add_argument("--vipune-shards", type=int, default=24, help="shard 0 of this many (24 -> 20 personas)")
    s.add_argument("--repeats", type=int, default=2)
    s.set_defaults(func=bench_search)
    s = sub.add_parser("dag")
    s.add_argument("--shards", type=int, nargs="+", default=[8, 470])
    s.add_argument("--full", type=int, nargs="*", default=[8],
                   help="shard counts that also get a full run, then a dry and a no-op run")
    s.set_defaults(func=bench_dag)
    sub.add_parser("reruns").set_defaults(func=bench_reruns)
    s = sub.add_parser("granularities")
    s.add_argument("--file", choices=["quarter", "M"], default="M")
    s.add_argument("--scale", type=float, default=4.0, help="unique-text scale of the quarter file to M")
    s.add_argument("--texts", type=int, default=200, help="sampled unique texts per granularity")
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--batch-size", type=int, default=4)
    s.add_argument("--repeats", type=int, default=2)
    s.add_argument("--reuse", action="store_true", help="reuse filter-rows results of an earlier invocation")
    s.set_defaults(func=bench_granularities)
    s = sub.add_parser("sweep")
    s.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    s.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    s.add_argument("--long", type=int, default=64, help="512-token texts per config")
    s.add_argument("--short", type=int, default=512, help="short texts per config")
    s.add_argument("--repeats", type=int, default=2)
    s.add_argument("--append", action="store_true", help="add these reps to benchmarks/out/sweep.json")
    s.set_defaults(func=bench_sweep)
    s = sub.add_parser("shard-memory")
    s.add_argument("--refs", nargs="+", help="package refs (default: merge-base of HEAD and main, main)")
    s.add_argument("--personas", type=int, nargs="+", default=[2, 4, 8])
    s.add_argument("--lanes", nargs="+", default=["reference", "vipune"], choices=["reference", "vipune"])
    s.add_argument("--repeats", type=int, default=1)
    s.add_argument("--skip-personas", action="store_true", help="only the M turn shard")
    s.add_argument("--m-turn-embed-shards", type=int, nargs="+", default=[1, 4],
                   help="the M turn shard's vectors in this many files (embed.shards; default config: 4)")
    s.add_argument("--no-m-turn", dest="m_turn", action="store_false",
                   help="skip shard 0 of 8 of the M-like turn view")
    s.set_defaults(func=bench_shard_memory)
    s = sub.add_parser("all")
    s.set_defaults(func=None)
    a = p.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    if a.bench in ("dag", "reruns", "granularities", "sweep") and SNAPSHOT is None:
        snapshot()
    os.environ["HF_HUB_OFFLINE"] = "1"
    if a.func is None:
        for name in ("info", "filter", "embed", "search", "dag", "reruns",
                     "granularities", "sweep", "shard-memory"):
            main([name])
        return
    a.func(a)


if __name__ == "__main__":
    main()
