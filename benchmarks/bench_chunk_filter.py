"""chunk filter: `filter-rows` of chunk rows against session rows, and against the code before.

One generated file of long sessions (12 turns x 150 words); interleaved, each its own process:
`filter-rows --granularity session`, `--granularity chunk` (the embed model's tokenizer), and
chunk rows with the package at ``REF`` (the chunker before each distinct session was tokenized
once), extracted with `git archive` and put first on the child's path. The ratios: chunk /
session with this checkout's package and with the code before; the chunk texts of both codes
must be identical. When the checkout's history lacks ``REF`` (a shallow clone), that side is
left out and a note says so.
"""

from __future__ import annotations

import io
import subprocess
import tarfile

import pyarrow.parquet as pq

from benchmarks.common import OUT, PYTHON, REPO, Figures, child_env, cli, generate, interleaved, mean, run_child, sized

REF = "adfee55"  # the chunker before issue 23
# small: the granularities benchmark's file; M: 40 instances of LongMemEval_M's shape.
SIZES = {
    "small": dict(
        instances=10,
        abstention=1,
        sessions_per_haystack=40,
        filler_pool=300,
        turns_per_session=12,
        words_per_turn=150,
        seed=1,
    ),
    "M": dict(
        instances=40,
        abstention=3,
        sessions_per_haystack=500,
        filler_pool=3000,
        turns_per_session=12,
        words_per_turn=150,
        seed=1,
    ),
}


def package_at(ref: str) -> tuple[str | None, str]:
    """The package folder of ``ref`` (``git archive``, once), or None and why not."""
    sha = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not sha:
        return None, f"{ref} is not in this checkout's history"
    root = OUT / f"package-{sha[:12]}"
    if not (root / "vipune_eval").exists():
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", sha, "vipune_eval"], capture_output=True, check=True
        ).stdout
        tarfile.open(fileobj=io.BytesIO(archive)).extractall(root)
    return str(root), ""


def bench_chunk_filter(benchmark, work, embed_model):
    data = generate(sized(SIZES))
    dest = work / "chunk-filter"
    tokenizer = embed_model.dir / "tokenizer.json"
    old, why = package_at(REF)
    # PYTHONSAFEPATH: `python -m` would otherwise put the working directory (this checkout) ahead
    # of PYTHONPATH, and the "code before" would be this checkout's again.
    old_env = child_env(PYTHONPATH=old, PYTHONSAFEPATH="1") if old else None
    if old:
        seen = run_child(
            [PYTHON, "-c", "import vipune_eval; print(vipune_eval.__file__)"], dest / "which.log", old_env
        ).stdout.strip()
        assert seen.startswith(old), f"the code at {REF} should be imported from {old}, not {seen}"

    def filter_rows(name: str, granularity: str, rep: int, env=None):
        extra = {"tokenizer": tokenizer} if granularity == "chunk" else {}
        return run_child(
            cli(
                "filter-rows",
                dataset=data,
                protocol="seed",
                granularity=granularity,
                rows_out=dest / name / "rows.parquet",
                texts_out=dest / name / "texts.parquet",
                **extra,
            ),
            dest / name / f"filter-rows-{rep}.log",
            env,
        )

    sides = {
        "session": lambda rep: filter_rows("session", "session", rep),
        "chunk": lambda rep: filter_rows("chunk", "chunk", rep),
    }
    if old:
        sides[f"chunk@{REF}"] = lambda rep: filter_rows("chunk-before", "chunk", rep, old_env)
    runs = interleaved(benchmark, sides)

    fig = Figures(
        f"chunk filter: filter-rows on a {data.stat().st_size / 1e6:.0f} MB file, "
        f"{embed_model.name}'s tokenizer for chunks",
        ["", "wall s (best)", "wall s (mean)", "CPU s", "peak RSS MiB", "unique texts"],
    )
    for name, rs in runs.items():
        folder = dest / ("chunk-before" if "@" in name else name)
        fig.row(
            name,
            min(r.wall_s for r in rs),
            mean([r.wall_s for r in rs]),
            mean([r.cpu_s for r in rs]),
            max(r.peak_rss_mib for r in rs),
            pq.read_metadata(folder / "texts.parquet").num_rows,
        )
    best = {name: min(r.wall_s for r in rs) for name, rs in runs.items()}
    for name in runs:
        if name != "session":
            fig.ratio(f"{name} / session (best wall)", best[name], best["session"])
    if old:
        fig.ratio(f"chunk / chunk@{REF} (best wall)", best["chunk"], best[f"chunk@{REF}"])
        same = pq.read_table(dest / "chunk" / "texts.parquet").equals(
            pq.read_table(dest / "chunk-before" / "texts.parquet")
        )
        fig.note(f"chunk texts identical to {REF}'s: {'yes' if same else 'NO'}")
    else:
        fig.note(f"no chunk@{REF} side: {why}")
    fig.record(benchmark)
