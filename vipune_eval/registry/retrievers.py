"""The registry of retrievers: every built-in name, family and parameter (one owner).

A ``retrievers:`` config entry is a preset name (``hybrid``) or a mapping ``{name: <label>,
use: <family or plugin>, <params>}``. Families carry typed parameters whose defaults are vipune
0.20's search; the built-in names are presets of them, so ``hybrid`` ≡ ``{use: hybrid}``. A
``use`` holding ``:`` is a plugin, ``path/to/file.py:function`` (relative to the working
directory) or ``package.module:function`` (see stages.search.plugin). ``resolve`` checks every
entry before any job runs and refuses what it does not know, listing what it does. How each
family ranks is stages.search.rankers's; the report's roles of the configured runs are
plan.manifest's.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from vipune_eval.errors import EvalError
from vipune_eval.registry.lanes import BINARY
from vipune_eval.registry.lanes import LIB as LIB_RUNS
from vipune_eval.registry.shared_arms import BM25_QUERIES
from vipune_eval.vipune.contract import MAX_SEARCH_LIMIT, RRF_K

# ------------------------------------------------------------------ parameter types


def _int(low: int, high: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"an integer in {low}..{high}")
        return value

    return check


def _choice(*options: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if not isinstance(value, str) or value not in options:
            raise ValueError("one of " + " | ".join(options))
        return value

    return check


# The highest values of the fusion's numbers: every number a config takes has one (a k past 2^63
# overflowed numpy's int64 in fuse-reference). At k = 10^6 the neighbouring ranks of a pool of
# 10,000 still differ by ~10^-12 in a score of ~10^-6, far above float64's rounding; RRF is long
# flat there.
MAX_RRF_K = 1_000_000
MAX_WEIGHT = 1_000_000


def _weights(value: Any) -> tuple[float, float]:
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(
            isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and 0 <= w <= MAX_WEIGHT
            for w in value
        )
    ):
        raise ValueError(f"[dense, bm25]: two finite numbers from 0 to {MAX_WEIGHT}")
    return (float(value[0]), float(value[1]))


# ------------------------------------------------------------------ kinds of retriever and arms


class Kind(Enum):
    """What a configured retriever is; it decides the search rule that runs it
    (vipune_eval.plan.workspace.SEARCHES)."""

    ARMS = "arms"  # a family setting ranked from a persona's shared arms, fused per run
    PERSONA = "persona"  # a family that ranks from the persona's own texts, per shard
    PLUGIN = "plugin"  # a user's function, called per persona
    # vipune's own code, named as its hybrid run (registry.lanes), a preset's ``use``:
    VIPUNE = BINARY.hybrid  # the binary
    LIB = LIB_RUNS.hybrid  # vipune's own search code on the cached vectors (vipune-lane, beside the binary)


VIPUNE_CODE = (Kind.VIPUNE, Kind.LIB)  # the kinds that run vipune's own code and mirror a family setting


@dataclass(frozen=True)
class Param:
    check: Callable[[Any], Any]
    default: Any
    help: str


@dataclass(frozen=True)
class Family:
    """A kind of reference retriever and its typed parameters (defaults = vipune 0.20's search);
    how it ranks is stages.search.rankers's."""

    name: str
    description: str
    params: dict[str, Param] = field(default_factory=dict)
    kind: Kind = Kind.ARMS  # ARMS (fused from the arms files) or PERSONA (searched per shard)


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("dense", "cosine over the cached vectors, vipune's semantic arm"),
        Family(
            "bm25",
            "SQLite FTS5 bm25, one index per persona",
            {
                "query": Param(
                    _choice(*BM25_QUERIES), "and", "and: every word quoted, vipune's implicit AND; or: the words OR-ed"
                )
            },
        ),
        Family(
            "hybrid",
            "weighted reciprocal rank fusion of the dense and bm25 arms, vipune's hybrid",
            {
                "k": Param(_int(1, MAX_RRF_K), RRF_K, "RRF constant: score = sum of w / (k + rank)"),
                "query": Param(_choice(*BM25_QUERIES), "and", "the bm25 arm's query"),
                "pool": Param(
                    _int(1, MAX_SEARCH_LIMIT),
                    None,
                    f"candidates per arm; null: vipune's clamp(10 x limit, 50, {MAX_SEARCH_LIMIT})",
                ),
                "weights": Param(_weights, (1.0, 1.0), "[dense, bm25] weights of the fusion"),
            },
        ),
        Family(
            "bm25-lme",
            "LongMemEval's own BM25 (rank_bm25 BM25Okapi over space-split text, its run_retrieval.py flat-bm25)",
            kind=Kind.PERSONA,
        ),
    )
}


# ------------------------------------------------------------------ presets and specs


@dataclass(frozen=True)
class Spec:
    """One configured retriever: its run name, kind and what it runs."""

    name: str
    kind: Kind
    use: str  # a family name, a plugin "target:function", or "vipune"
    params: dict[str, Any] = field(default_factory=dict)  # every family parameter, defaults filled
    description: str = ""
    mirror: dict[str, Any] | None = None  # the family setting a vipune-lane retriever must agree with

    @property
    def family(self) -> bool:
        """A family setting (ranked from the arms or from the persona): it has parameters."""
        return self.kind in (Kind.ARMS, Kind.PERSONA)

    @property
    def reference(self) -> bool:
        """Runs on the cached vectors without vipune's code (neither lane)."""
        return self.kind not in VIPUNE_CODE

    def canonical(self) -> str:
        """What the search job runs, as canonical JSON (a rule param: a change reruns this run only)."""
        return json.dumps(
            {"name": self.name, "use": self.use, **self.params}, sort_keys=True, allow_nan=False, separators=(",", ":")
        )

    def setting(self) -> dict[str, Any]:
        """The family setting alone (no name): equal settings give equal rankings."""
        return {"use": self.use, **self.params}


@dataclass(frozen=True)
class Preset:
    name: str
    binary: bool  # vipune's own code, in either lane (its setting is the one it mirrors), or a family
    description: str
    setting: dict[str, Any]  # the family setting (reference) or the setting it mirrors (vipune)
    kind: Kind = Kind.VIPUNE  # of vipune's code: the binary lane (VIPUNE) or the lib lane (LIB)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(BINARY.hybrid, True, "the vipune binary: search --hybrid --recency 0 --no-touch", {"use": "hybrid"}),
        Preset(
            BINARY.semantic,
            True,
            "the vipune binary on the same database: search --no-hybrid (its dense arm alone)",
            {"use": "dense"},
        ),
        Preset(
            LIB_RUNS.hybrid,
            True,
            "vipune's own search code on the cached vectors (vipune-lane: "
            "MemoryStore::search_hybrid, its pool and fusion compiled from the build's source)",
            {"use": "hybrid"},
            Kind.LIB,
        ),
        Preset(
            LIB_RUNS.semantic,
            True,
            "vipune's own search code on the cached vectors: MemoryStore::search",
            {"use": "dense"},
            Kind.LIB,
        ),
        Preset("dense", False, "cosine over the cached vectors, vipune's semantic arm", {"use": "dense"}),
        Preset("bm25", False, "SQLite FTS5 bm25 with vipune's AND-of-every-word query", {"use": "bm25"}),
        Preset("bm25-or", False, "SQLite FTS5 bm25 with an OR of the words", {"use": "bm25", "query": "or"}),
        Preset("hybrid", False, f"RRF (k = {RRF_K:g}) of dense and bm25: vipune's hybrid algorithm", {"use": "hybrid"}),
        Preset("hybrid-or", False, f"RRF (k = {RRF_K:g}) of dense and bm25-or", {"use": "hybrid", "query": "or"}),
        Preset(
            "bm25-lme",
            False,
            "LongMemEval's own BM25: rank_bm25 over space-split text, its flat-bm25",
            {"use": "bm25-lme"},
        ),
    )
}
NAMES = tuple(PRESETS)
DEFAULT = tuple(n for n in NAMES if n != "bm25-lme")  # the schema's default list
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
# What-if variants (plan.whatif_grid) are named from their parameters, "hybrid~k=60~query=or":
# '~' never appears in a configured name, so the two never clash.
VARIANT_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*(~[A-Za-z0-9_]+=[A-Za-z0-9._+,-]+)+")


def family_params(family: str, given: dict[str, Any], where: str) -> dict[str, Any]:
    """Every parameter of ``family``, checked, defaults filled in."""
    if family not in FAMILIES:
        raise EvalError(
            f"{where}: unknown family {family!r} (families: {', '.join(FAMILIES)}; "
            "a plugin is 'path/to/file.py:function' or 'package.module:function')"
        )
    known = FAMILIES[family].params
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise EvalError(
            f"{where}: family {family!r} has no parameter {', '.join(map(repr, unknown))} "
            f"(its parameters: {', '.join(known) or 'none'})"
        )
    out = {}
    for key, param in known.items():
        if key not in given or (given[key] is None and param.default is None):
            out[key] = param.default
            continue
        try:
            out[key] = param.check(given[key])
        except ValueError as exc:
            raise EvalError(
                f"{where}: {family}.{key} must be {exc}, got {given[key]!r} ({family}'s parameters: {', '.join(known)})"
            ) from None
    return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


def _preset(name: str) -> Spec:
    preset = PRESETS[name]
    setting = dict(preset.setting)
    family = setting.pop("use")
    params = family_params(family, setting, f"preset {name!r}")
    if preset.binary:
        return Spec(name, preset.kind, preset.kind.value, {}, preset.description, {"use": family, **params})
    return Spec(name, FAMILIES[family].kind, family, params, preset.description)


def spec(entry: Any, index: int = 0) -> Spec:
    """One ``retrievers:`` entry, checked (a plugin's function is imported by the config check,
    plan.config_check, not here: the search jobs parse their specs too)."""
    where = f"retrievers[{index}]"
    if isinstance(entry, str):
        if entry not in PRESETS:
            raise EvalError(
                f"{where}: unknown retriever {entry!r} (presets: {', '.join(PRESETS)}; "
                f"or a mapping {{name, use: {' | '.join(FAMILIES)} | file.py:function, ...}})"
            )
        return _preset(entry)
    if not isinstance(entry, dict):
        raise EvalError(f"{where}: a preset name or a mapping {{name, use, ...}}, got {entry!r}")
    entry = dict(entry)
    name, use = entry.pop("name", None), entry.pop("use", None)
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise EvalError(
            f"{where}: 'name' must be a label of letters, digits, '.', '_', '+' or '-' "
            f"(it names the run and its files), got {name!r}"
        )
    where = f"retrievers[{index}] ({name})"
    if name in PRESETS or name.startswith("vipune"):
        raise EvalError(
            f"{where}: the name {name!r} is taken by a preset or reserved for vipune's own runs "
            f"(presets: {', '.join(PRESETS)})"
        )
    if not isinstance(use, str) or not use:
        raise EvalError(
            f"{where}: 'use' must name a family ({', '.join(FAMILIES)}) or a plugin "
            f"'path/to/file.py:function' / 'package.module:function', got {use!r}"
        )
    if ":" in use:
        if entry:
            raise EvalError(f"{where}: a plugin takes no parameters, got {', '.join(sorted(entry))}")
        return Spec(name, Kind.PLUGIN, use, {}, f"plugin {use}")
    params = family_params(use, entry, where)
    return Spec(name, FAMILIES[use].kind, use, params, FAMILIES[use].description)


def resolve(entries: list[Any]) -> list[Spec]:
    """Every configured retriever, checked; two entries with one name are refused."""
    specs = [spec(e, i) for i, e in enumerate(entries)]
    seen: set[str] = set()
    for s in specs:
        if s.name in seen:
            raise EvalError(f"retrievers: two entries are named {s.name!r} (each names a run)")
        seen.add(s.name)
    return specs


def from_json(text: str) -> Spec:
    """A spec back from ``Spec.canonical`` (the search job's argument), checked again."""
    data = json.loads(text)
    if data.get("use") in (k.value for k in VIPUNE_CODE) or data.get("name") in PRESETS:
        return _preset(data["name"])
    name = data.get("name")
    if isinstance(name, str) and VARIANT_PATTERN.fullmatch(name):
        return replace(spec({**data, "name": "variant"}), name=name)
    return spec(data)


def from_argument(text: str) -> Spec:
    """A search job's ``--retriever``: a preset name or a spec's canonical JSON."""
    if text.lstrip().startswith("{"):
        return from_json(text)
    return spec(text)


def uses_binary(specs: list[Spec]) -> bool:
    """Does a configured retriever run vipune's code (vipune-lane is found beside the binary)?"""
    return any(s.kind in VIPUNE_CODE for s in specs)
