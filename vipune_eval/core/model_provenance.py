"""What the report says about the model's files (report.json's provenance.model): its fingerprint,
where its files came from and whether they are the pinned bytes.

Its shape, shared by its writer (registry.models.provenance, beside the pins) and the report. Not
in core.fingerprints: the downloads reach that module, and an edit of this shape must not rerun
them (and, through the model's fingerprint, every embedding).
"""

from __future__ import annotations

from typing import TypedDict

from vipune_eval.core.fingerprints import ModelFingerprint


class Pin(TypedDict):
    """A pinned file of the model beside the one found (registry.models.against_pins)."""

    pinned: str  # the pinned sha256
    found: str | None  # the sha256 found (None: not among the model's files)


class ModelProvenance(ModelFingerprint):
    """report.json's provenance.model (registry.models.provenance)."""

    source: str  # local, download
    path: str | None
    pinned: bool | None  # None: that repository and revision have no pins
    pins: dict[str, Pin] | None  # file → {pinned, found}; None: no pins
