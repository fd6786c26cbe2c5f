"""The workflow's config schema and the repository's config, as the Snakefile reads them."""

import copy
from typing import Any

import yaml

from support.scenarios import REPO

SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
DEFAULTS = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def defaults() -> dict[str, Any]:
    """A copy of config/config.yaml to change."""
    return copy.deepcopy(DEFAULTS)
