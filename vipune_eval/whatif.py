"""The what-if lab: a grid of one family's settings, chosen on one split, confirmed on the other.

``whatif: {base: hybrid, grid: {k: [10, 25, 60], query: [and, or]}, measure: recall_any@5,
select_on: dev}`` makes every point of the grid (the product of the lists, in the config's key
order) a reference-lane run named from its parameters (``hybrid~k=60~query=or``). Each is one
family setting of vipune_eval.retrievers, fused from the shared arms like any other, so a new
point costs one fusion and one scoring, and the earlier points' files are left alone.

``analyse`` picks ``chosen``, the best on ``select_on`` (a tie goes to the base's own setting
when it is among the tied, else to the first in grid order), and tests every variant against the
base on the other split: the difference, a paired randomisation p, a paired bootstrap interval,
and Holm's correction over the whole grid (every variant tried is one comparison).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from . import retrievers as registry
from .io import EvalError
from .stats import holm, paired_bootstrap_interval, paired_randomization

SPLITS = ("dev", "test")
SEPARATOR = "~"
ALPHA = 0.05
TIE_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Lab:
    """A checked ``whatif:`` block: the base setting and one spec per grid point."""

    base: registry.Spec
    variants: tuple[registry.Spec, ...]   # in grid order
    grid: dict[str, list[Any]]            # parameter → values, as configured (checked)
    measure: str
    select_on: str

    @property
    def confirm_on(self) -> str:
        return next(s for s in SPLITS if s != self.select_on)


def value_text(value: Any) -> str:
    """A parameter value as it appears in a variant's name."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(value_text(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def variant_name(base: str, point: dict[str, Any]) -> str:
    """``<base>~<param>=<value>...``, parameters sorted by name: the same point keeps its name
    (and its files) however the grid's keys are ordered or grown along its lists."""
    name = base + "".join(f"{SEPARATOR}{key}={value_text(point[key])}" for key in sorted(point))
    if not registry.VARIANT_PATTERN.fullmatch(name):
        raise EvalError(f"whatif: the variant name {name!r} is not filesystem-safe (letters, digits, "
                        "'.', '_', '+', '=', ',', '~', '-')")
    return name


def _base(name: Any, specs: Sequence[registry.Spec]) -> registry.Spec:
    families = [s.name for s in specs if s.lane == "reference" and not s.plugin]
    presets = [p.name for p in registry.PRESETS.values() if p.lane == "reference"]
    known = f"(configured family settings: {', '.join(families) or 'none'}; reference presets: {', '.join(presets)})"
    configured = next((s for s in specs if s.name == name), None)
    if configured is None and name in registry.PRESETS:
        configured = registry.spec(name)
    if configured is None or configured.lane != "reference" or configured.plugin:
        why = ("is the vipune binary, which the lab cannot vary: use its mirror, e.g. 'hybrid'"
               if configured is not None and configured.lane == "vipune"
               else "is a plugin, which has no parameters" if configured is not None
               else "is neither a configured retriever nor a preset")
        raise EvalError(f"whatif.base {name!r} {why} {known}")
    return configured


def resolve(block: dict[str, Any] | None, specs: Sequence[registry.Spec],
            measure_keys: Sequence[str]) -> Lab | None:
    """The ``whatif:`` block checked against the registry (before any job runs)."""
    if not block:
        return None
    base = _base(block["base"], specs)
    family = registry.FAMILIES[base.use]
    grid = block["grid"]
    if not grid:
        raise EvalError(f"whatif.grid is empty: give lists of values of {base.use}'s parameters "
                        f"({', '.join(family.params) or 'it has none'})")
    for key, values in grid.items():
        if key not in family.params:
            raise EvalError(f"whatif.grid: family {base.use!r} (of base {base.name!r}) has no parameter "
                            f"{key!r} (its parameters: {', '.join(family.params) or 'none'})")
        if not isinstance(values, list) or not values:
            raise EvalError(f"whatif.grid.{key}: a non-empty list of values, got {values!r}")
    measure = block.get("measure", "recall_any@5")
    if measure not in measure_keys:
        raise EvalError(f"whatif.measure {measure!r} is not a measure of the primary view "
                        f"(known: {', '.join(measure_keys)})")
    variants: list[registry.Spec] = []
    names: set[str] = set()
    for values in itertools.product(*grid.values()):
        point = dict(zip(grid, values))
        params = registry.family_params(base.use, {**base.params, **point}, f"whatif.grid {point}")
        name = variant_name(base.name, {k: params[k] for k in grid})
        if name in names:
            raise EvalError(f"whatif.grid: the point {point} is listed twice (variant {name})")
        names.add(name)
        variants.append(registry.Spec(name, "reference", base.use, params,
                                      f"what-if variant of {base.name}: {family.description}"))
    return Lab(base, tuple(variants), {k: list(v) for k, v in grid.items()}, measure,
               block.get("select_on", "dev"))


# ---------------------------------------------------------------- choose and confirm


def _values(per_query: dict[str, dict[str, Any]], measure: str, split: str) -> dict[str, float]:
    return {q: float(row[measure]) for q, row in per_query.items() if row["split"] == split}


def _mean(values: dict[str, float]) -> float | None:
    return sum(values.values()) / len(values) if values else None


def choose(scores: Sequence[float | None], base_index: int | None) -> int:
    """Index of the best score (None counts as -inf); a tie goes to ``base_index`` when it is
    among the tied, else to the first in grid order."""
    if not scores:
        raise ValueError("no variants to choose from")
    best = max(-np.inf if s is None else s for s in scores)
    tied = [i for i, s in enumerate(scores) if s is not None and abs(s - best) <= TIE_TOLERANCE]
    if not tied:  # every score is None
        return base_index if base_index is not None else 0
    return base_index if base_index in tied else tied[0]


def analyse(measure: str, select_on: str, base: dict[str, Any], variants: list[dict[str, Any]],
            resamples: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """``base`` and each variant: {name, params, run, per_query: qid → {measure, split, ...}}.

    Returns report.json's ``whatif`` block (see the module docstring)."""
    confirm_on = next(s for s in SPLITS if s != select_on)
    base_values = {s: _values(base["per_query"], measure, s) for s in SPLITS}
    rows: list[dict[str, Any]] = []
    for v in variants:
        values = {s: _values(v["per_query"], measure, s) for s in SPLITS}
        shared = sorted(set(values[confirm_on]) & set(base_values[confirm_on]))
        a = [values[confirm_on][q] for q in shared]
        b = [base_values[confirm_on][q] for q in shared]
        row = {"name": v["name"], "params": v["params"], "run": v["run"],
               **{s: _mean(values[s]) for s in SPLITS}, "pairs": len(shared)}
        if shared:
            row["test_delta"] = float(np.mean(np.subtract(a, b)))
            row["p"] = paired_randomization(a, b, resamples=resamples, seed=seed)
            row["interval"] = list(paired_bootstrap_interval(a, b, resamples=resamples, seed=seed))
        else:
            row.update(test_delta=None, p=1.0, interval=None)
        rows.append(row)
    adjusted = holm({str(i): r["p"] for i, r in enumerate(rows)}) if rows else {}
    for i, r in enumerate(rows):
        r["p_holm"] = adjusted[str(i)]
    base_index = next((i for i, v in enumerate(variants) if v["params"] == base["params"]), None)
    chosen = rows[choose([r[select_on] for r in rows], base_index)] if rows else None
    best_confirm = rows[choose([r[confirm_on] for r in rows], base_index)] if rows else None
    confirmed = bool(chosen and chosen["test_delta"] is not None and chosen["test_delta"] > 0
                     and chosen["p_holm"] < ALPHA)
    return {
        "measure": measure, "select_on": select_on, "confirm_on": confirm_on, "tried": len(rows),
        "correction": f"holm over the {len(rows)} variants tried", "alpha": ALPHA,
        "base": {"name": base["name"], "params": base["params"], "run": base["run"],
                 **{s: _mean(base_values[s]) for s in SPLITS},
                 "pairs": {s: len(base_values[s]) for s in SPLITS}},
        "chosen": chosen["name"] if chosen else None,
        "chosen_is_base_setting": base_index is not None and chosen is rows[base_index],
        "confirmed": confirmed,
        f"best_on_{confirm_on}": best_confirm["name"] if best_confirm else None,
        "variants": rows,
    }


def verdict(block: dict[str, Any]) -> list[str]:
    """Plain sentences: what was chosen, whether the other split confirms it, and how many were tried."""
    measure, sel, conf = block["measure"], block["select_on"], block["confirm_on"]
    rows = {r["name"]: r for r in block["variants"]}
    chosen = rows.get(block["chosen"])
    if chosen is None:
        return ["No variant was scored."]
    base = block["base"]
    out = [f"{block['tried']} variants of `{base['name']}` tried; {measure} chosen on {sel} "
           f"({base['pairs'][sel]} pairs), confirmed on {conf} ({base['pairs'][conf]} pairs); "
           f"{block['correction']}."]
    if block["chosen_is_base_setting"]:
        out.append(f"Chosen on {sel}: `{chosen['name']}`, the base's own setting — no change is suggested.")
    else:
        delta = chosen["test_delta"]
        shown = "–" if delta is None else f"{100 * delta:+.1f} points, p_holm = {chosen['p_holm']:.3f}"
        state = ("confirmed" if block["confirmed"] else "not confirmed (no significant gain after "
                 f"Holm over {block['tried']} variants)")
        out.append(f"Chosen on {sel}: `{chosen['name']}` ({sel} {chosen[sel]:.3f} vs base "
                   f"{base[sel]:.3f}); on {conf} against the base: {shown} — {state}.")
    best = block.get(f"best_on_{conf}")
    if best and best != block["chosen"]:
        out.append(f"`{best}` scores best on {conf} but was not chosen on {sel}: it is not the winner "
                   f"(picking by the {conf} score is the lucky pick the split guards against).")
    return out
