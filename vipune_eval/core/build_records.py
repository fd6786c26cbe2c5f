"""What is recorded of a vipune build: its fingerprint (vipune.binary.binary_fingerprint, or
vipune.vipune_lane.lane_only_fingerprint for a vipune-lane built alone), its vipune-lane's
(vipune.vipune_lane.lane_fingerprint, with what ``vipune-lane version`` says of its build) and its
preflight's checks (stages.search.preflight). Their writers and the report share these shapes."""

from __future__ import annotations

from typing import Any, TypedDict


class LaneCopy(TypedDict, total=False):
    """An item of vipune's code (or a whole file) a vipune-lane copies, and whether the source it was
    built against still has it as copied (vipune.lane_source)."""

    file: str
    item: str | None
    copied_to: str
    what: str
    source: str | None  # its sha256 in that source (None: the source no longer has it)
    same: bool


class LaneBuild(TypedDict, total=False):
    """What ``vipune-lane version`` says of how it was built (recorded by lane/build.rs and build.sh)."""

    name: str  # "vipune-lane"
    lane: str  # lane/'s crate version
    vipune: str | None  # the vipune release it was built against
    vipune_source: str  # the release, or the checkout with its git description
    lane_source: str  # the sha256 of lane/'s sources
    binary_sha256: str | None  # the binary it was built beside (None: built alone)
    profile: str  # "fast": build.sh --fast
    calls: list[str]
    sources: dict[str, Any]  # the sha256s of what it compiled; ``copies``: list[LaneCopy]
    unrecorded_arms: str | None  # why it records no arms (None: it records them)


class _VipuneFingerprint(TypedDict):
    kind: str
    id: str
    sha256: str
    version: str


class VipuneFingerprint(_VipuneFingerprint, total=False):
    """A vipune build's fingerprint (vipune.binary.binary_fingerprint: ``files`` and
    ``content_sha256`` where vipune.fingerprint_files are set), or a vipune-lane built alone
    (vipune.vipune_lane.lane_only_fingerprint: ``lane_only``, ``binary``, ``built``)."""

    files: dict[str, str]
    content_sha256: str
    lane_only: bool
    binary: str
    built: LaneBuild


class VipuneLaneFingerprint(TypedDict):
    """A vipune-lane's fingerprint (vipune.vipune_lane.lane_fingerprint): report.json's provenance.lane."""

    kind: str
    id: str
    sha256: str
    version: str
    binary: str  # the build id of the binary it was built beside
    built: LaneBuild


class PreflightCheck(TypedDict, total=False):
    check: str
    expected: Any
    seen: Any
    passed: bool
    drift: str  # what a failure is, in words, where that is known
    min_cosine: float  # the parity checks': the lowest cosine seen


class PreflightResult(TypedDict, total=False):
    """A build's preflight (stages.search.preflight); a file of an earlier vipune-eval lacks some keys."""

    binary: VipuneFingerprint
    mode: str
    checks: list[PreflightCheck]
    embedding_parity: PreflightCheck
    query_embedding_parity: PreflightCheck
    follows_contract: bool
    failed_checks: list[str]
    drift: list[str]  # each failure in words
