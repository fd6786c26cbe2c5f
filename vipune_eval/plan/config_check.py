"""The configuration checked before any job runs: every problem named in one message.

``check`` sets the schema's defaults, then collects what the schema says (shapes, bounds, each
unknown key with its nearest valid name) and what it cannot say (limits against each other, NaN,
the retrievers and the what-if grid) into ``Problems``; ``prepare`` adds what resolving the dataset
and the model finds, then ``Problems.raise_any`` names them all (Snakemake's own ``validate``
stops at the first and prints the whole config).
"""

from __future__ import annotations

import copy
import difflib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import jsonschema
import yaml

from vipune_eval.errors import EvalError
from vipune_eval.plan import whatif_grid
from vipune_eval.registry import granularities, measures, retrievers

T = TypeVar("T")


# vipune.binary null or empty: the maintainer's loop names it as `$(.ci/vipune/build.sh …)`, which
# prints the binary's path only when the build succeeds (docs/reruns.md)
EMPTY_BINARY = (
    "vipune.binary is empty: the build printed nothing: did it fail? (`$(.ci/vipune/build.sh …)` "
    "gives vipune.binary the path a successful build prints; a failed build prints none, its "
    "messages are above: run the build alone to read them)"
)


def _whole(checker: Any, instance: Any) -> bool:
    """An integer setting is a Python int: JSON Schema counts 8.0 as an integer, and a float
    reached range() and argparse's ``type=int`` in the jobs (a TypeError traceback)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


def _message(error: jsonschema.ValidationError) -> str:
    """jsonschema's message, but a float where an integer setting is asked for says what to write."""
    named = error.validator_value if error.validator == "type" else ()  # a type, or a list of them
    types = [named] if isinstance(named, str) else list(named) if isinstance(named, (list, tuple)) else []
    if isinstance(error.instance, float) and "integer" in types:
        written = f" (write {int(error.instance)})" if error.instance.is_integer() else ""
        return f"{error.instance!r} is not a whole number: an integer setting takes no decimal point{written}"
    return error.message


def schema_problems(config: dict[str, Any], schema: dict[str, Any]) -> tuple[list[str], list[tuple[str, str | None]]]:
    """Every way ``config`` breaks ``schema``, worded for a person: (problems, unknown keys as
    (dotted key, its nearest valid dotted key or None)). Sets the schema's defaults in ``config``
    as Snakemake's ``validate`` does; an integer setting refuses a float, integral or not."""
    base = jsonschema.validators.validator_for(schema)
    base = jsonschema.validators.extend(base, type_checker=base.TYPE_CHECKER.redefine("integer", _whole))
    check_properties = base.VALIDATORS["properties"]

    def properties(validator, props, instance, subschema):
        if isinstance(instance, dict):
            for name, sub in props.items():
                if "default" in sub:
                    instance.setdefault(name, copy.deepcopy(sub["default"]))
        yield from check_properties(validator, props, instance, subschema)

    validator = jsonschema.validators.extend(base, {"properties": properties})(schema)
    problems: list[str] = []
    unknown: list[tuple[str, str | None]] = []
    for error in sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path]):
        where = ".".join(map(str, error.absolute_path))
        if error.validator == "additionalProperties" and error.validator_value is False:
            known = list(error.schema.get("properties", {}))
            for key in sorted(set(error.instance) - set(known)):
                close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
                prefix = f"{where}." if where else ""
                unknown.append((prefix + str(key), prefix + close[0] if close else None))
        elif error.validator in ("anyOf", "oneOf") and error.context:
            # each alternative's own complaint ("... greater than the maximum of ...; or 'auto' was expected")
            said = dict.fromkeys(_message(e) for e in error.context)
            problems.append(f"{where or 'the config'}: {error.instance!r} is none of its forms: {'; or '.join(said)}")
        elif where == "vipune.binary" and not error.instance:
            problems.append(EMPTY_BINARY)
        else:
            problems.append(f"{where or 'the config'}: {_message(error)}")
    return problems, unknown


# A number as YAML 1.1 reads it (PyYAML, so Snakemake's --configfile and --config): a dot in the
# mantissa and a sign in the exponent. Without them (1e-9, 1.0e9) it is read as text.
_TEXT_NUMBER = re.compile(r"'([-+]?(?:\d[\d_]*(?:\.\d*)?|\.\d+)[eE][-+]?\d+)'")


def yaml_number_hint(problem: str) -> str:
    """``problem`` with a hint for each number in it that YAML 1.1 read as text: '1e-9' →
    write 1.0e-9; '1e3' → write 1000."""
    hints = []
    for match in _TEXT_NUMBER.finditer(problem):
        text = match.group(1)
        if not isinstance(yaml.safe_load(text), str):
            continue
        value = float(text.replace("_", ""))
        if value.is_integer() and abs(value) < 1e15:
            written = str(int(value))
        else:
            mantissa, _, exponent = text.lower().partition("e")
            written = f"{mantissa if '.' in mantissa else mantissa + '.0'}e{exponent if exponent[0] in '+-' else '+' + exponent}"
        hints.append(f"YAML 1.1 reads {text} as text: write {written}")
    return problem + "".join(f" ({hint})" for hint in dict.fromkeys(hints))


def duplicated_keys(path: str | Path) -> list[str]:
    """Each key a config file gives twice in one mapping, named with both lines: YAML (and so
    Snakemake's ``configfile:`` and ``--configfile``) keeps the last silently and drops the first
    block whole. A file YAML cannot read gives none here (Snakemake has said why)."""
    try:
        root = yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return []
    problems: list[str] = []

    def walk(node: yaml.Node, where: str) -> None:
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key, value in node.value:
                name = f"{where}{key.value}" if isinstance(key, yaml.ScalarNode) else None
                if name is not None and name in first:
                    problems.append(
                        f"{path}:{key.start_mark.line + 1}: {name} is given twice (also at line "
                        f"{first[name]}): YAML keeps the last and silently drops the first; "
                        "merge the two into one"
                    )
                elif name is not None:
                    first[name] = key.start_mark.line + 1
                walk(value, f"{name}." if name is not None else where)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, f"{where}{i}.")

    if root is not None:
        walk(root, "")
    return problems


def cross_key_problems(config: dict[str, Any]) -> list[str]:
    """What a schema cannot say: limits against each other, the primary granularity, NaN."""
    problems = []
    if max(config["ks"]) > config["search_limit"]:
        problems.append(f"search_limit ({config['search_limit']}) must be at least the largest k ({max(config['ks'])})")
    if config["search"]["row_limit"] < config["search_limit"]:
        problems.append(
            f"search.row_limit ({config['search']['row_limit']}) must be at least "
            f"search_limit ({config['search_limit']})"
        )
    problems += granularities.problems(config["granularities"])
    for section, key in (("vipune", "timeout"), ("search", "plugin_timeout")):
        seconds = config[section][key]  # the schema's bounds let NaN and .inf through (it names the rest)
        if isinstance(seconds, float) and not math.isfinite(seconds):
            problems.append(f"{section}.{key} must be a finite number of seconds > 0, got {seconds!r}")
    fraction = config["split"]["dev_fraction"]
    if not 0 <= fraction <= 1:  # the schema's bounds let NaN through
        problems.append(f"split.dev_fraction must be a number from 0 to 1, got {fraction!r}")
    elif isinstance(config.get("whatif"), dict) and fraction in (0, 1):
        empty = "dev" if fraction == 0 else "test"
        select_on = config["whatif"]["select_on"]
        role = "chosen" if select_on == empty else "confirmed"
        problems.append(
            f"split.dev_fraction {fraction} leaves the {empty} split empty, and the what-if lab "
            f"(whatif, select_on: {select_on}) needs pairs on both splits: nothing could be "
            f"{role} on {empty}; set split.dev_fraction strictly between 0 and 1, "
            "or remove the whatif block"
        )
    return problems


def config_error(
    problems: list[str], unknown: Sequence[tuple[str, str | None]] = (), fixes: Sequence[str] = ()
) -> EvalError:
    """One error naming every problem of the configuration; unknown keys come last, and the fix
    (the problems' own ``fixes`` first) renames each to its nearest valid name, so the last line a
    user reads says what to type."""
    lines = [yaml_number_hint(p) for p in problems]
    for key, close in unknown:
        lines.append(f"{key}: not a config key" + (f"; did you mean {close}?" if close else ""))
    renames = [f"{key} → {close}" for key, close in unknown if close]
    others = [key for key, close in unknown if not close]
    fix = "fix these keys in your config file (every key: docs/configuration.md)"
    if others:
        fix = f"remove {', '.join(others)}, or " + fix
    fix = "; ".join([*dict.fromkeys(fixes), fix])
    if renames:
        fix = f"{fix}; rename {', '.join(renames)}"
    head = "bad configuration: " if len(lines) == 1 else f"bad configuration, {len(lines)} problems:\n  - "
    return EvalError(head + "\n  - ".join(lines), fix=fix)


@dataclass
class Problems:
    """Every problem of the configuration found so far, named at once by ``raise_any``."""

    found: list[str] = field(default_factory=list)
    unknown: list[tuple[str, str | None]] = field(default_factory=list)  # (key, its nearest valid key)
    fixes: list[str] = field(default_factory=list)  # what the problems' own errors say to do

    def attempt(self, step: Callable[..., T], *args: Any) -> T | None:
        """``step(*args)``, its EvalError kept as one more problem (so every problem is named at
        once); None when it failed."""
        try:
            return step(*args)
        except EvalError as exc:
            self.found.append(exc.message)
            if exc.fix:
                self.fixes.append(exc.fix)
        except (KeyError, TypeError, ValueError, AttributeError):
            if not self.found:  # a shape the schema's own problems do not explain
                raise
        return None

    def raise_any(self) -> None:
        if self.found or self.unknown:
            raise config_error(self.found, self.unknown, self.fixes)


@dataclass(frozen=True)
class Checked:
    """What the check resolved (None where it found a problem), and the problems it found."""

    specs: list[retrievers.Spec] | None
    lab: whatif_grid.Lab | None
    problems: Problems


def check(config: dict[str, Any], schema: dict[str, Any], files: Sequence[str | Path] = ()) -> Checked:
    """The schema's problems (its defaults set in ``config`` first), the retrievers, the what-if
    grid and what the schema cannot say, and a key given twice in one of the config ``files`` the
    config was read from; nothing is raised here (see ``Problems.raise_any``)."""
    problems = Problems(*schema_problems(config, schema))
    problems.found[:0] = [p for f in dict.fromkeys(map(str, files)) for p in duplicated_keys(f)]
    specs = problems.attempt(retrievers.resolve, config["retrievers"])
    for s in specs or []:
        if s.kind is retrievers.Kind.PLUGIN:
            # here, not at the top: the plugin runner imports numpy and pyarrow, which every
            # Snakemake start (each cluster job is one) would pay for, plugins or not
            from vipune_eval.stages.search import plugin

            problems.attempt(plugin.load, s.use)  # imported now, so a broken plugin stops no job later
    lab = None
    if specs is not None:
        lab = problems.attempt(
            lambda: whatif_grid.resolve(config.get("whatif"), specs, measures.keys(config["ks"], measures.SEED))
        )
        clash = sorted({s.name for s in lab.variants} & {s.name for s in specs}) if lab else []
        if clash:
            problems.found.append(f"whatif: the variant names {clash} are taken by configured retrievers")
    problems.found += problems.attempt(cross_key_problems, config) or []
    return Checked(specs, lab, problems)
