"""``--config`` on Snakemake's command line, read as the YAML values docs/configuration.md says it takes.

Snakemake reads a ``--config`` value with YAML's base loader, which makes every nested scalar a
string (``ks=[1,5]`` arrives as ``['1', '5']``, ``search={threads: 4}`` as ``{'threads': '4'}``,
``model={path: null}`` as the folder ``null``); only a whole value that is a number or a boolean
keeps its type.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

from vipune_eval.errors import EvalError


def read_config_args(config: dict[str, Any], entries: Iterable[str] | None) -> None:
    """Merge each ``key=value`` of ``--config`` over ``config`` again, its value read as YAML
    (``yaml.safe_load``, as a ``--configfile`` is read), the way Snakemake merged it: nested keys
    one by one, lists replace lists, later entries win. A value that is no YAML is refused,
    naming the form that works."""
    from snakemake.utils import update_config

    for entry in entries or ():
        key, _, text = entry.partition("=")
        if isinstance(config.get(key), (bool, int, float)) or not text:
            continue  # Snakemake's own reading of a whole number, boolean or empty value stands
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            problem = str(exc).splitlines()[0]
            raise EvalError(
                f"--config {entry!r}: the value is not YAML ({problem})",
                fix="write each value as YAML and quote the whole entry for the shell, e.g. "
                "--config 'ks=[1, 5]' 'search={threads: 4}' 'model={path: null}'",
            ) from None
        update_config(config, {key: value})
