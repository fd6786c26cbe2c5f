"""plots: recall@k with intervals, per-category recall, where the gold sessions rank, and the
plots a run draws only when it has something to show (``PLOTS``, the one table of them).

A new plot is one function ``draw(report, out)`` here and its entry in ``PLOTS`` (its name, the
report section it stands beside, when a run has something to show), its caption
workflow/report/<name>.rst, and its test: the workflow asks for it, Snakemake's HTML report lists
it, and the HTML page puts it beside its section.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from vipune_eval.core.io import atomic_path, read_json
from vipune_eval.core.run_metrics import mean
from vipune_eval.errors import EvalError
from vipune_eval.registry.views import PRIMARY
from vipune_eval.stages.report.report_json import Report, WhatIfVariant, primary_key, recall_keys

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _pyplot() -> ModuleType:
    """matplotlib's pyplot, imported when a plot is drawn (the parse-time plan reads ``PLOTS``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Figure, path: Path) -> None:
    plt = _pyplot()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def error_bars(values: list[float], intervals: list[list[float] | None]) -> list[list[float]]:
    """Matplotlib's yerr from 95% intervals; none drawn where there is none (too few pairs)."""
    return [
        [v - i[0] if i else 0.0 for v, i in zip(values, intervals)],
        [i[1] - v if i else 0.0 for v, i in zip(values, intervals)],
    ]


def category_label(category: str, pairs: int) -> str:
    wrapped = category.replace("single-session-", "single-session-\n").replace("-reasoning", "-\nreasoning")
    return f"{wrapped}\n({pairs} pair{'s' if pairs != 1 else ''})"


def retriever_ticks(ax: Any, names: list[str]) -> None:
    """One tick per retriever, slanted: names like vipune-lib-semantic would run into each other."""
    ax.set_xticks(range(len(names)), names, rotation=25, ha="right", rotation_mode="anchor")


def recall_at_k(report: Report, out: Path) -> None:
    plt, keys = _pyplot(), recall_keys(report)
    names = report["retriever_order"]  # vipune's lanes first, then as configured (not the JSON's sorted keys)
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(names), 4))
    width = 0.8 / len(keys)
    for i, key in enumerate(keys):
        values = [report["retrievers"][n]["metrics"][key] for n in names]
        intervals = [report["retrievers"][n]["intervals"][key] for n in names]
        xs = [j + (i - (len(keys) - 1) / 2) * width for j in range(len(names))]
        ax.bar(xs, values, width, yerr=error_bars(values, intervals), capsize=3, label=key)
    retriever_ticks(ax, names)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("recall@k (95% interval)")
    ax.set_title(f"recall@k per retriever ({report['pairs']} pairs)")
    ax.legend(loc="lower right", fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    _save(fig, out)


def per_category(report: Report, out: Path) -> None:
    plt, key = _pyplot(), primary_key(report)
    names = report["retriever_order"]
    categories = sorted({c for e in report["retrievers"].values() for c in e["per_category"]})
    fig, ax = plt.subplots(figsize=(2 + 1.6 * len(categories), 4.5))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        entry = report["retrievers"][name]["per_category"]
        values = [mean(entry[c], key) if c in entry else 0.0 for c in categories]
        xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(categories))]
        ax.bar(xs, values, width, label=name)
    ax.set_xticks(
        range(len(categories)),
        [category_label(c, report["dataset"]["per_category"].get(c, 0)) for c in categories],
        fontsize="small",
    )
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(key)
    ax.set_title(f"{key} per LongMemEval category")
    ax.legend(fontsize="small", ncol=min(len(names), 3), loc="upper center", bbox_to_anchor=(0.5, -0.18))
    ax.grid(axis="y", alpha=0.3)
    _save(fig, out)


def gold_rank_distribution(report: Report, out: Path) -> None:
    plt, limit = _pyplot(), report["views"][PRIMARY.name]["scored_with"]["ranking_settings"]["limit"]
    ranks = report["diagnostics"]["gold_ranks"]
    counts = Counter(rank for pair in ranks["pairs"] for rank in pair["gold_ranks"].values())
    labels = [str(r) for r in range(1, limit + 1)] + [f"not in\ntop {limit}"]
    values = [counts.get(r, 0) for r in range(1, limit + 1)] + [counts.get(None, 0)]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.bar(labels, values, color=["tab:blue"] * limit + ["tab:red"])
    ax.set_xlabel("rank of a gold session")
    ax.set_ylabel("gold sessions")
    ax.set_title(f"Where {ranks['retriever']} ranks the {sum(values)} gold sessions (search limit {limit})")
    ax.grid(axis="y", alpha=0.3)
    _save(fig, out)


def granularities(report: Report, out: Path) -> None:
    """recall@k of each retriever at each granularity (drawn when more than one is configured)."""
    plt, key = _pyplot(), primary_key(report)
    grains = report["granularities"]
    names = report["retriever_order"]
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(names), 4))
    width = 0.8 / len(grains)
    for i, (g, block) in enumerate(grains.items()):
        values = [block["retrievers"][n]["metrics"][key] if n in block["retrievers"] else 0.0 for n in names]
        intervals = [block["retrievers"][n]["intervals"][key] if n in block["retrievers"] else None for n in names]
        xs = [j + (i - (len(grains) - 1) / 2) * width for j in range(len(names))]
        ax.bar(xs, values, width, yerr=error_bars(values, intervals), capsize=3, label=g)
    retriever_ticks(ax, names)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(f"{key} (95% interval)")
    ax.set_title(f"{key} per granularity (rows collapse to sessions)")
    ax.legend(loc="lower right", fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    _save(fig, out)


def latency(report: Report, out: Path) -> None:
    """Accuracy against latency: recall@k against median and p95 search time, one point per build."""
    plt, key = _pyplot(), primary_key(report)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for build in report["builds"]:
        seconds = build.get("search_seconds")
        if not seconds:
            continue
        y = build["metrics"][key]
        ax.errorbar([seconds["p50"]], [y], xerr=[[0], [max(seconds["p95"] - seconds["p50"], 0)]], fmt="o", capsize=4)
        ax.annotate(build["id"], (seconds["p50"], y), textcoords="offset points", xytext=(6, 6), fontsize="small")
    ax.set_xlabel("search latency per query, s (dot: median; bar to p95)")
    ax.set_ylabel(key)
    ax.set_title(f"{key} against search latency per vipune build")
    ax.grid(alpha=0.3)
    _save(fig, out)


def whatif(report: Report, out: Path) -> None:
    """The what-if measure against each numeric grid parameter, one line per setting of the
    others, solid on the selection split and dashed on the confirmation split."""
    plt = _pyplot()
    block = report["whatif"]
    grid, rows = block["grid"], block["variants"]
    numeric = [
        p for p, values in grid.items() if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    ]
    panels: list[str | None] = [*numeric] or [None]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    sel, conf = block["select_on"], block["confirm_on"]
    for ax, param in zip(axes[0], panels):
        if param is None:  # no numeric parameter: one point per variant
            xs = range(len(rows))
            for split, style in ((sel, "-o"), (conf, "--s")):
                ax.plot(xs, [r[split] for r in rows], style, label=split)
            ax.set_xticks(list(xs), [r["name"] for r in rows], rotation=45, ha="right", fontsize="small")
        else:
            others = [p for p in grid if p != param]
            lines: dict[tuple[str, ...], list[WhatIfVariant]] = {}
            for r in rows:
                lines.setdefault(tuple(str(r["params"][p]) for p in others), []).append(r)
            for i, (setting, members) in enumerate(lines.items()):
                members = sorted(members, key=lambda r: r["params"][param])
                label = ", ".join(f"{p}={v}" for p, v in zip(others, setting)) or block["base"]["name"]
                values = [r["params"][param] for r in members]
                color = f"C{i % 10}"
                ax.plot(values, [r[sel] for r in members], "-o", color=color, label=f"{label} ({sel})")
                ax.plot(values, [r[conf] for r in members], "--s", color=color, label=f"{label} ({conf})")
            ax.set_xlabel(param)
        ax.set_ylabel(block["measure"])
        ax.set_ylim(-0.02, 1.05)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small")
    fig.suptitle(
        f"what-if: {block['tried']} variants of {block['base']['name']}; chosen on {sel}: "
        f"{block['chosen']}; solid {sel}, dashed {conf}",
        fontsize="medium",
    )
    _save(fig, out)


@dataclass(frozen=True)
class RunShape:
    """What a run holds that decides whether a plot has something to show (plan.workspace.Workspace.plots
    fills it at parse time)."""

    seed_views: int  # views of the seed protocol (one per granularity)
    builds: bool  # vipune's lane with a primary build: the builds' search latencies
    lab: bool  # the what-if lab


@dataclass(frozen=True)
class Plot:
    name: str  # results/plots/<name>.png; caption workflow/report/<name>.rst
    draw: Callable[[Report, Path], None]
    beside: str  # the key of the report section it stands beside (stages.report.sections)
    shown: Callable[[RunShape], bool] = lambda run: True


PLOTS = (
    Plot("recall_at_k", recall_at_k, "overall"),
    Plot("recall_per_category", per_category, "per-category"),
    Plot("gold_ranks", gold_rank_distribution, "worst-pairs"),
    Plot("granularities", granularities, "granularities", lambda run: run.seed_views > 1),
    Plot("latency", latency, "builds", lambda run: run.builds),
    Plot("whatif", whatif, "whatif", lambda run: run.lab),
)
BY_NAME = {plot.name: plot for plot in PLOTS}


def shown(run: RunShape) -> list[str]:
    """The plots of a run, in ``PLOTS``'s order: each one that has something to show (a
    placeholder would only say what is not there)."""
    return [plot.name for plot in PLOTS if plot.shown(run)]


def run_plots(report: Path, out_dir: Path, plots: list[str]) -> None:
    """Draw ``plots`` (names of ``PLOTS``): the workflow asks for those that have something to
    show in this run (``shown``), so no plot is a placeholder."""
    data = read_json(report)
    unknown = sorted(set(plots) - set(BY_NAME))
    if unknown:
        raise EvalError(f"no plot named {', '.join(unknown)} (plots: {', '.join(BY_NAME)})")
    for name in plots:
        BY_NAME[name].draw(data, out_dir / f"{name}.png")
