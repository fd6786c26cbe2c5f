"""What was scored, a line each (report.json's provenance): the vipune build and the vipune-lane built
beside it, the model (and whether its files are the pinned bytes), the dataset and its corpus,
the protocol. report.md and the HTML pages list them all; a terminal shows the first few
(``identity``). A vipune-lane in words is this module's too, for every build that has one
(``lanes``: a compared build's in the maintainer's loop), and the copies its source changes."""

from __future__ import annotations

from vipune_eval.stages.report.report_json import LaneCopy, ModelProvenance, Report, VipuneLaneFingerprint


def vipune_line(report: Report, short: bool = False) -> str | None:
    """The primary vipune build: its version, binary sha256 and the release the contract was
    checked against, then its build id and where it came from (``short``: the version, id and
    source only, for a terminal)."""
    prov = report["provenance"]
    vipune = prov.get("vipune")
    if not vipune:
        return None
    build = next((b for b in report["builds"] if b["id"] == vipune.get("id")), None)
    source = f", from {build['source']}" if build and build.get("source") else ""
    if short:
        return f"vipune {vipune['version']}, build {vipune['id']}{source}"
    what = (
        f"a vipune-lane built alone, no binary: lane sha256 {vipune['sha256']}"
        if vipune.get("lane_only")
        else f"binary sha256 {vipune['sha256']}"
    )
    return (
        f"vipune {vipune['version']} ({what}; the contract was checked against {prov['contract_release']}): "
        f"build {vipune['id']}{source}"
    )


FAST = "a fast build (build.sh --fast: not the release profile's bytes, the same rankings)"


def lane_source(lane: VipuneLaneFingerprint) -> str:
    """Where a vipune-lane's search code came from: the vipune source it was built from (a
    release, or a checkout with its git description), and a fast build named as one (other bytes
    than the release profile's: build.sh --fast)."""
    built = lane["built"]
    source = built.get("vipune_source") or f"vipune {lane['version']}"
    return f"vipune's search code from {source}" + (f", {FAST}" if built.get("profile") == "fast" else "")


def lane_words(lane: VipuneLaneFingerprint) -> str:
    """A vipune-lane in words: its id and bytes, where its search code came from, the binary it
    belongs to, its own sources."""
    built = lane["built"]
    sources = f", lane/ sources {built['lane_source'][:12]}" if built.get("lane_source") else ""
    beside = (
        "built alone (build.sh --lane-only: no binary)" if lane.get("lane_only") else f"beside build {lane['binary']}"
    )
    return f"vipune-lane {lane['id']} (sha256 {lane['sha256'][:12]}): {lane_source(lane)}, {beside}{sources}"


def lane_line(report: Report) -> str | None:
    """The vipune-lane of vipune.binary (the lib lane's runs)."""
    lane = report["provenance"].get("lane")
    return lane_words(lane) if lane else None


def lanes(report: Report) -> dict[str, VipuneLaneFingerprint]:
    """Build id → its vipune-lane, for every build this run has one for: vipune.binary's, and each
    compared build's where the builds are compared on the lib lane (the maintainer's loop)."""
    out = {b["id"]: lane for b in report.get("builds", []) if (lane := b.get("lane"))}
    primary = report["provenance"].get("lane")
    return {primary["binary"]: primary, **out} if primary else out


def lane_copies(lane: VipuneLaneFingerprint | None) -> list[LaneCopy]:
    """What a vipune-lane copies of vipune's code (``vipune-lane version``'s "sources", recorded by
    .ci/vipune/build.sh); none for no lane, or a lane that records none (the tests' fake)."""
    if not lane:
        return []
    copies: list[LaneCopy] = ((lane.get("built") or {}).get("sources") or {}).get("copies") or []
    return copies


def stale_items(lane: VipuneLaneFingerprint | None) -> list[str]:
    """Each item a vipune-lane copies that its source changes or no longer has, named (``copied``):
    the binary runs this source there, vipune-lib the copy."""
    return [copied(c) for c in lane_copies(lane) if not c.get("same")]


def changed_copies(lane: VipuneLaneFingerprint) -> list[str]:
    """Each item of vipune's code a vipune-lane copies that the source it was built against
    changes or no longer has, in words."""
    copies = lane_copies(lane)
    return [
        f"{copied(c)}, which this source {'changes' if c.get('source') else 'no longer has'} "
        f"({c['what']}; the copy: {c['copied_to']})"
        for c in copies
        if not c.get("same")
    ]


def stale_copies(report: Report) -> list[str]:
    """A warning for each item (or whole file) of vipune's code on the search's or the import's
    path that a build's vipune-lane copies or stands in for and that its source changes: the binary
    runs that edit, vipune-lib does not (every build's lane: the release's and the checkout's in
    the loop, each named where there are several)."""
    built = lanes(report)
    return [
        f"vipune-lib{'' if len(built) == 1 else f' of build {build}'} copies {copy}: a stale copy: the binary "
        "runs this source's edit there, vipune-lib the code it copied, so its numbers do not follow that edit"
        for build, lane in built.items()
        for copy in changed_copies(lane)
    ]


def copied(copy: LaneCopy) -> str:
    """What a copy copies: an item of a file (`fn execute` from src/commands/mod.rs) or a whole file."""
    return f"`{copy.get('item')}` from {copy['file']}" if copy.get("item") else copy["file"]


def model_line(model: ModelProvenance) -> str:
    """The model: which files, where they came from, and whether they are the pinned bytes of the
    model they are laid out as (provenance.model, registry.models.provenance)."""
    name = f"{model['repo_id']}@{model['revision'][:12]}"
    files = f"{name} `{model['file']}` (sha256 {model['files'][model['file']][:12]})"
    where = f"files from {model['path']} laid out as {files}" if model["path"] else f"{files}, downloaded"
    line = f"model: {where}, {model['pooling']} pooling + L2"
    pins = model["pins"]
    if model["pinned"] is None or pins is None:  # the one is None where the other is
        return line + f": {name} has no pins, so these bytes are recorded, not checked"
    if model["pinned"]:
        return line + f": the pinned bytes of {name}"
    differ = "; ".join(
        f"`{file}` sha256 {pins[file]['pinned'][:12]}"
        for file in sorted(pins)
        if pins[file]["found"] != pins[file]["pinned"]
    )
    return (
        line + f": not the pinned bytes of {name} (pinned: {differ}): numbers are not comparable with "
        "runs on the pinned model"
    )


def dataset_line(report: Report) -> str:
    data = report["provenance"]["dataset"]
    return (
        f"dataset {data.get('repo_id') or 'local file'} {data.get('filename') or ''} "
        f"(sha256 {data['sha256'][:12]}): {report['pairs']} pairs"
    )


def corpus_line(report: Report) -> str | None:
    corpus = report.get("corpus")
    if not corpus:
        return None
    sha = f", sha256 {corpus['sha256'][:12]}…" if corpus["sha256"] else ""
    return f"corpus: {corpus['preset'] or corpus['release']} ({corpus['source']}{sha}): {corpus['note']}"


def scored(report: Report) -> list[str]:
    """Every line of what was scored (report.md's and the HTML pages' list)."""
    return [
        line
        for line in (
            vipune_line(report),
            lane_line(report),
            model_line(report["provenance"]["model"]),
            dataset_line(report),
            corpus_line(report),
            f"protocol: {report['protocol']}",
        )
        if line
    ]


def identity(report: Report) -> list[str]:
    """The lines a terminal shows first: the build, the model, the data."""
    return [
        line
        for line in (
            vipune_line(report, short=True),
            lane_line(report),
            model_line(report["provenance"]["model"]),
            corpus_line(report) or dataset_line(report),
        )
        if line
    ]
