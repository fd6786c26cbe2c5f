"""Helpers shared by the benchmark files (fixtures live in conftest.py).

Everything a benchmark prints is a ratio of two things measured side by side in one run
(:func:`interleaved`), so a shared, noisy machine moves both sides alike. Child processes are
timed with :func:`run_child` (wall, CPU, peak RSS from ``wait4``); command lines come from the
CLI's own table (:func:`cli`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vipune_eval.stages.embed.projection import BGE_SMALL
from vipune_eval.vipune.contract import EMBED_MODEL_ID, EMBED_MODEL_REVISION

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "out"  # git-ignored: generated data, work folders, results JSON
sys.path.insert(0, str(REPO / "tests"))  # test support: the data generator, the tiny model
from support.config import DEFAULTS  # noqa: E402  (config/config.yaml)

SPLIT = DEFAULTS["split"]  # the dev/test split a run of the workflow makes

PYTHON = sys.executable
BGE_REPO_ID, BGE_REVISION = EMBED_MODEL_ID, EMBED_MODEL_REVISION  # where vipune looks for its model

# Knobs (environment): how big, how many reps, which model.
SIZE = os.environ.get("VIPUNE_BENCH_SIZE", "small")  # "small" (minutes on 2 cores) or "M"
REPS = int(os.environ.get("VIPUNE_BENCH_REPS", "2"))
MODEL_ENV = "VIPUNE_BENCH_MODEL"  # a model folder (model.onnx, tokenizer.json, config.json, ...)
DEFAULT_MODEL = REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx"  # used when present


def sized(sizes: dict[str, Any]) -> Any:
    """This run's entry of a benchmark's ``{"small": ..., "M": ...}`` table."""
    if SIZE not in sizes:
        raise SystemExit(f"VIPUNE_BENCH_SIZE={SIZE!r}: this benchmark knows {sorted(sizes)}")
    return sizes[SIZE]


# LongMemEval_M's shape (470 personas of 500 session rows, ~2.4 kB each) and a small one: the data
# of the lib-lane benchmarks (bench_lanes, bench_loop)
PERSONAS_500_ROWS = {
    "small": dict(
        instances=40,
        abstention=0,
        sessions_per_haystack=500,
        filler_pool=4000,
        turns_per_session=10,
        words_per_turn=40,
        seed=11,
    ),
    "M": dict(
        instances=500,
        abstention=30,
        sessions_per_haystack=500,
        filler_pool=30000,
        turns_per_session=10,
        words_per_turn=40,
        seed=11,
    ),
}


# ------------------------------------------------------------------ command lines


def _subparser(command: str) -> argparse.ArgumentParser:
    from vipune_eval import cli

    if command not in cli.COMMANDS:
        raise KeyError(f"vipune-eval has no command {command!r}; it has {sorted(cli.COMMANDS)}")
    sub = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def cli(command: str, **options: Any) -> list[str]:
    """``vipune-eval COMMAND ...`` built from the CLI's table: each keyword is an option's dest
    (``rows_out=p`` -> ``--rows-out p``), lists become several values, True a flag. The line is
    parsed back by the CLI's own parser, so a renamed or missing option fails here, by name."""
    parser = _subparser(command)
    by_dest = {a.dest: a for a in parser._actions if a.option_strings}
    argv = [command]
    for dest, value in options.items():
        if dest not in by_dest:
            raise KeyError(f"vipune-eval {command} has no option for {dest!r}; it has {sorted(by_dest)}")
        action = by_dest[dest]
        flag = max(action.option_strings, key=len)
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            if bool(value) != isinstance(action, argparse._StoreFalseAction):
                argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv += [flag, *map(str, value)]
        else:
            argv += [flag, str(value)]
    from vipune_eval import cli as module

    try:
        module.parser().parse_args(argv)
    except SystemExit as exc:
        raise ValueError(f"vipune-eval {' '.join(argv)}: refused by the CLI's parser") from exc
    return [PYTHON, "-m", "vipune_eval", *argv]


# ------------------------------------------------------------------ child processes


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(PYTHON).parent), env.get("PATH", "")])
    env["HF_HUB_OFFLINE"] = "1"
    env.update(extra)
    return env


@dataclass
class Child:
    """A finished child process: wall and CPU seconds, peak RSS (MiB, largest in its tree)."""

    wall_s: float
    cpu_s: float
    peak_rss_mib: float
    stdout: str

    def json(self) -> Any:
        return json.loads(self.stdout.strip().splitlines()[-1])


# A small launcher between us and the child: a child forked from this (large) process would
# inherit our resident size as its peak (Linux keeps the high-water mark across exec).
LAUNCHER = r"""
import json, os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    json.dump({"wall_s": time.perf_counter() - start, "cpu_s": ru.ru_utime + ru.ru_stime,
               "maxrss_kb": ru.ru_maxrss}, f)
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""


def run_child(argv: list[Any], log: Path, env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,)) -> Child:
    """Run ``argv`` (stdout to ``log``, stderr beside it); fail naming the command and its stderr
    where it exits other than ``ok``."""
    argv = [str(a) for a in argv]
    log.parent.mkdir(parents=True, exist_ok=True)
    usage = log.with_suffix(".usage.json")
    with open(log, "w") as out, open(log.with_suffix(".err"), "w") as err:
        code = subprocess.run(
            [PYTHON, "-c", LAUNCHER, str(usage), *argv], stdout=out, stderr=err, env=env or child_env()
        ).returncode
    if code not in ok:
        raise RuntimeError(f"exit {code}: {' '.join(argv)}\n{log.with_suffix('.err').read_text()[-3000:]}")
    u = json.loads(usage.read_text())
    return Child(u["wall_s"], u["cpu_s"], u["maxrss_kb"] / 1024, log.read_text())


def run_children(steps: list[tuple[list[Any], Path]]) -> Child:
    """Several commands one after the other, as one side: wall and CPU summed, the largest peak RSS."""
    done = [run_child(argv, log) for argv, log in steps]
    return Child(
        sum(c.wall_s for c in done), sum(c.cpu_s for c in done), max(c.peak_rss_mib for c in done), done[-1].stdout
    )


def interleaved(benchmark: Any, sides: dict[str, Callable[[int], Any]], reps: int = REPS) -> dict[str, list[Any]]:
    """Call every side once per rep, alternating the order (rep 0 as given, rep 1 reversed, ...)
    so a change of load hits all sides; the sides' results by name. The reps are
    pytest-benchmark's rounds (its table times a whole round: every side once)."""
    out: dict[str, list[Any]] = {name: [] for name in sides}
    counter = iter(range(10**9))

    def one_round() -> None:
        rep = next(counter)
        for name in list(sides) if rep % 2 == 0 else list(sides)[::-1]:
            out[name].append(sides[name](rep))

    benchmark.pedantic(one_round, rounds=reps, iterations=1)
    return out


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


# ------------------------------------------------------------------ figures


@dataclass
class Figures:
    """What one benchmark prints and hands to RESULTS.md: a table and its ratios."""

    title: str
    head: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    ratios: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def row(self, *cells: Any) -> None:
        self.rows.append([_fmt(c) for c in cells])

    def ratio(self, label: str, num: float, den: float) -> float:
        value = num / den if den else float("nan")
        self.ratios[label] = round(value, 3)
        return value

    def note(self, text: str) -> None:
        self.notes.append(text)

    def show(self) -> str:
        lines = [f"== {self.title}"]
        if self.head:
            widths = [max(len(str(r[i])) for r in [self.head, *self.rows]) for i in range(len(self.head))]
            for r in [self.head, ["-" * w for w in widths], *self.rows]:
                lines.append("  " + "  ".join(str(c).rjust(w) for c, w in zip(r, widths)))
        lines += [f"  ratio {k} = {v:.3f}" for k, v in self.ratios.items()]
        lines += [f"  - {n}" for n in self.notes]
        return "\n".join(lines)

    def record(self, benchmark: Any) -> None:
        """Print, and attach to pytest-benchmark's ``extra_info`` (its JSON feeds RESULTS.md)."""
        print("\n" + self.show(), flush=True)
        benchmark.extra_info.update(
            title=self.title, head=self.head, rows=self.rows, ratios=self.ratios, notes=self.notes, size=SIZE
        )


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"
    return str(x)


# ------------------------------------------------------------------ machine, model cost


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "mem_gib": round(mem / 2**30, 1),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


# MiniLM-L6 and bge-small-en-v1.5 are BERT encoders of hidden 384, intermediate 1536.
ENCODERS = {"MiniLM-L6": dict(layers=6, hidden=384, intermediate=1536), "bge-small-en-v1.5": BGE_SMALL}


MATMUL_CHILD = r"""
import json, sys, time, numpy as np
n = int(sys.argv[1])
a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
b = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
a @ b
best = 1e9
for _ in range(int(sys.argv[2])):
    t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t)
print(json.dumps({"n": n, "best_s": best, "gflops": 2 * n ** 3 / best / 1e9}))
"""


def matmul_peak(threads: int, log: Path, n: int = 2048, repeats: int = 8) -> float:
    """GFLOP/s of a float32 n x n numpy matmul (best of ``repeats``) in a child limited to
    ``threads`` BLAS threads: the machine's limit, for 'fraction of peak' figures."""
    t = str(threads)
    env = child_env(OMP_NUM_THREADS=t, OPENBLAS_NUM_THREADS=t, MKL_NUM_THREADS=t)
    return run_child([PYTHON, "-c", MATMUL_CHILD, n, repeats], log, env).json()["gflops"]


# ------------------------------------------------------------------ data


def generate(args: dict[str, int]) -> Path:
    """A synthetic LongMemEval file (tests/support/synthetic.py) for ``args``, made once and
    reused while the arguments and the generator are unchanged."""
    from support import synthetic

    key = hashlib.sha256(
        (json.dumps(args, sort_keys=True) + Path(synthetic.__file__).read_text()).encode()
    ).hexdigest()[:12]
    path = OUT / "data" / f"longmemeval-{key}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        synthetic.write_dataset(tmp, **args)
        tmp.rename(path)
        path.with_suffix(".args.json").write_text(json.dumps(args, indent=2))
    return path


@dataclass(frozen=True)
class Model:
    """An embedding model folder as the CLI takes it (``--model-dir``, ``--file``, ``--pooling``)."""

    dir: Path
    name: str
    file: str = "model.onnx"
    pooling: str = "mean"


def filter_view(
    dataset: Path, dest: Path, granularity: str = "session", tokenizer: Path | None = None
) -> dict[str, Child]:
    """``filter-pairs`` (pairs, qrels, summary) and ``filter-rows`` (rows, unique texts) of a view."""
    extra = {"tokenizer": tokenizer} if tokenizer else {}
    return {
        "filter": run_child(
            cli(
                "filter-pairs",
                dataset=dataset,
                protocol="seed",
                granularity=granularity,
                pairs_out=dest / "pairs.parquet",
                qrels_out=dest / "qrels.txt",
                summary_out=dest / "summary.json",
                split_seed=SPLIT["seed"],
                dev_fraction=SPLIT["dev_fraction"],
            ),
            dest / "filter.log",
        ),
        "filter-rows": run_child(
            cli(
                "filter-rows",
                dataset=dataset,
                protocol="seed",
                granularity=granularity,
                rows_out=dest / "rows.parquet",
                texts_out=dest / "texts.parquet",
                **extra,
            ),
            dest / "filter-rows.log",
        ),
    }


def import_files(personas: list, dest: Path) -> list[tuple[Path, Any]]:
    """(folder, persona) per persona, each folder holding the persona's vipune import JSONL
    (prepared before a bare loop's timing starts)."""
    from vipune_eval.vipune.import_format import import_lines

    jobs = []
    for i, p in enumerate(personas):
        folder = dest / f"p{i}"
        folder.mkdir(parents=True)
        (folder / "import.jsonl").write_text("\n".join(import_lines(p)) + "\n", encoding="utf-8")
        jobs.append((folder, p))
    return jobs


def model_fingerprint(model: Model, dest: Path) -> Path:
    """A stand-in model fingerprint for ``embed`` (its hash labels the shard)."""
    path = dest / "model-fingerprint.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"model": model.name, "benchmark": True}))
    return path


def embed_cmd(model: Model, texts: Path, out: Path, threads: int = 2, batch_tokens: int = 512) -> list[str]:
    """``vipune-eval embed`` with a vector store of its own, emptied here: every run computes
    its vectors (a store shared between runs would hand the second one stored vectors)."""
    store = out.parent / f"{out.stem}-vectors"
    shutil.rmtree(store, ignore_errors=True)
    return cli(
        "embed",
        texts=texts,
        model_dir=model.dir,
        file=model.file,
        pooling=model.pooling,
        shard=0,
        shards=1,
        threads=threads,
        batch_tokens=batch_tokens,
        out=out,
        model_fingerprint=model_fingerprint(model, out.parent),
        store=store,
    )


EMBED_CHILD = r"""
import json, sys, time
from pathlib import Path
import pyarrow.parquet as pq
from vipune_eval.stages.embed.embed import load_model
from vipune_eval.core.tokens import count_tokens
texts_path, model_dir, file, pooling = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
threads, batch = int(sys.argv[5]), int(sys.argv[6])
texts = pq.read_table(texts_path).column("text").to_pylist()
tokens = count_tokens(model_dir, texts)
texts = [texts[i] for i in tokens.argsort(kind="stable")]  # length-sorted, as run_embed does
t0 = time.perf_counter()
model = load_model(model_dir, file, pooling, threads=threads)
t1 = time.perf_counter()
n = sum(1 for _ in model.embed(texts, batch_size=batch))
t2 = time.perf_counter()
print(json.dumps({"texts": n, "load_s": t1 - t0, "embed_s": t2 - t1,
                  "tokens_embedded": int(sum(min(int(t), 512) for t in tokens))}))
"""


def embed_rate(texts: Path, model: Model, threads: int, batch: int, log: Path) -> dict[str, float]:
    """Embed ``texts`` (Parquet with a ``text`` column) in a fresh process through the package's
    own ``load_model``: texts/s and tokens/s of the embed loop alone (model loaded), peak RSS
    of the process."""
    child = run_child([PYTHON, "-c", EMBED_CHILD, texts, model.dir, model.file, model.pooling, threads, batch], log)
    r = child.json()
    return {
        **r,
        "texts_per_s": r["texts"] / r["embed_s"],
        "tokens_per_s": r["tokens_embedded"] / r["embed_s"],
        "peak_rss_mib": child.peak_rss_mib,
        "mean_tokens": r["tokens_embedded"] / max(r["texts"], 1),
    }


def sample_texts(texts: Path, n: int, out: Path, seed: int = 0) -> Path:
    """``n`` rows of a texts Parquet file, drawn with ``seed``."""
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(texts)
    pick = sorted(random.Random(seed).sample(range(table.num_rows), min(n, table.num_rows)))
    pq.write_table(table.take(pa.array(pick, pa.int64())), out)
    return out
