"""The what-if lab's grid: one family's settings, each point a named run of a family setting.

``whatif: {base: hybrid, grid: {k: [10, 25, 60], query: [and, or]}, measure: recall_any@5,
select_on: dev}`` makes every point of the grid (the product of the lists, in the config's key
order) a run of the reference retrievers named from its parameters (``hybrid~k=60~query=or``). Each is one
family setting of registry.retrievers, fused from the shared arms like any other, so a new
point costs one fusion and one scoring, and the earlier points' files are left alone.

Checked at parse time, before any job runs (the registry refuses an unknown base, parameter or
ill-typed value, listing the known); the choice and its confirmation are stages.report.whatif's.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vipune_eval.errors import EvalError
from vipune_eval.registry import retrievers as registry
from vipune_eval.stages.filter.split import SPLITS  # not report.whatif: its statistics cost each Snakemake start ~0.2 s

SEPARATOR = "~"
MAX_POINTS = 500  # each point is a fusion, a scoring and a line in the DAG


@dataclass(frozen=True)
class Lab:
    """A checked ``whatif:`` block: the base setting and one spec per grid point."""

    base: registry.Spec
    variants: tuple[registry.Spec, ...]  # in grid order
    grid: dict[str, list[Any]]  # parameter → values, as configured (checked)
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
        raise EvalError(
            f"whatif: the variant name {name!r} is not filesystem-safe (letters, digits, "
            "'.', '_', '+', '=', ',', '~', '-')"
        )
    return name


def _base(name: Any, specs: Sequence[registry.Spec]) -> registry.Spec:
    families = [s.name for s in specs if s.family]
    presets = [p.name for p in registry.PRESETS.values() if not p.binary]
    known = f"(configured family settings: {', '.join(families) or 'none'}; reference presets: {', '.join(presets)})"
    configured = next((s for s in specs if s.name == name), None)
    if configured is None and name in registry.PRESETS:
        configured = registry.spec(name)
    if configured is None or not configured.family:
        why = (
            "is the vipune binary, which the lab cannot vary: use its mirror, e.g. 'hybrid'"
            if configured is not None and configured.kind is registry.Kind.VIPUNE
            else "is a plugin, which has no parameters"
            if configured is not None
            else "is neither a configured retriever nor a preset"
        )
        raise EvalError(f"whatif.base {name!r} {why} {known}")
    return configured


def resolve(block: dict[str, Any] | None, specs: Sequence[registry.Spec], measure_keys: Sequence[str]) -> Lab | None:
    """The ``whatif:`` block checked against the registry (before any job runs)."""
    if not block:
        return None
    base = _base(block["base"], specs)
    family = registry.FAMILIES[base.use]
    grid = block["grid"]
    if not grid:
        raise EvalError(
            f"whatif.grid is empty: give lists of values of {base.use}'s parameters "
            f"({', '.join(family.params) or 'it has none'})"
        )
    for key, values in grid.items():
        if key not in family.params:
            raise EvalError(
                f"whatif.grid: family {base.use!r} (of base {base.name!r}) has no parameter "
                f"{key!r} (its parameters: {', '.join(family.params) or 'none'})"
            )
        if not isinstance(values, list) or not values:
            raise EvalError(f"whatif.grid.{key}: a non-empty list of values, got {values!r}")
    points = math.prod(len(values) for values in grid.values())
    if points > MAX_POINTS:
        sizes = " × ".join(f"{len(values)} {key}" for key, values in grid.items())
        raise EvalError(
            f"whatif.grid has {points} points ({sizes}), more than the lab's cap of {MAX_POINTS}: "
            "each point is a run of its own; grid fewer values (a coarse grid first, then a "
            "finer one around the best)"
        )
    measure = block.get("measure", "recall_any@5")
    if measure not in measure_keys:
        raise EvalError(
            f"whatif.measure {measure!r} is not a measure of the primary view (known: {', '.join(measure_keys)})"
        )
    variants: list[registry.Spec] = []
    names: set[str] = set()
    for values in itertools.product(*grid.values()):
        point = dict(zip(grid, values))
        params = registry.family_params(base.use, {**base.params, **point}, f"whatif.grid {point}")
        name = variant_name(base.name, {k: params[k] for k in grid})
        if name in names:
            raise EvalError(f"whatif.grid: the point {point} is listed twice (variant {name})")
        names.add(name)
        variants.append(
            registry.Spec(name, base.kind, base.use, params, f"what-if variant of {base.name}: {family.description}")
        )
    return Lab(base, tuple(variants), {k: list(v) for k, v in grid.items()}, measure, block.get("select_on", "dev"))
