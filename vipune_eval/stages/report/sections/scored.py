"""What was scored, a line each (report.json's provenance): the vipune build and the lane built
beside it, the model (and whether its files are the pinned bytes), the dataset and its corpus,
the protocol. report.md and the HTML pages list them all; a terminal shows the first few
(``identity``)."""

from __future__ import annotations

from typing import Any, Mapping

from vipune_eval.stages.report.report_json import Report


def vipune_line(report: Report, short: bool = False) -> str | None:
    """The primary vipune build: its version, binary sha256 and the release the contract was
    checked against, then its build id and where it came from (``short``: the version, id and
    source only, for a terminal)."""
    prov = report["provenance"]
    vipune = prov.get("vipune")
    if not vipune:
        return None
    build = next((b for b in report["builds"] if b["id"] == vipune.get("id")), {})
    source = f", from {build['source']}" if build.get("source") else ""
    if short:
        return f"vipune {vipune['version']}, build {vipune['id']}{source}"
    return (f"vipune {vipune['version']} (binary sha256 {vipune['sha256']}; the contract was checked "
            f"against {prov['contract_release']}): build {vipune['id']}{source}")


def lane_line(report: Report) -> str | None:
    """The vipune-lane of the lib lane: the vipune source it was built from (a release, or a
    checkout with its git description), the binary it belongs to, its own sources, and a fast
    build named as one (other bytes than the release profile's: build.sh --fast)."""
    lane = report["provenance"].get("lane")
    if not lane:
        return None
    built = lane.get("built") or {}
    source = built.get("vipune_source") or f"vipune {lane['version']}"
    sources = f", lane/ sources {built['lane_source'][:12]}" if built.get("lane_source") else ""
    fast = (", a fast build (build.sh --fast: not the release profile's bytes, the same rankings)"
            if built.get("profile") == "fast" else "")
    return (f"vipune-lane {lane['id']} (sha256 {lane['sha256'][:12]}): vipune's search code from {source}, "
            f"beside build {lane['binary']}{sources}{fast}")


def stale_copies(report: Report) -> list[str]:
    """Each item (or whole file) of vipune's code on the search's or the import's path that
    vipune-lane copies or stands in for, and that the source it was built against changes or no
    longer has (``vipune-lane version``'s "sources", recorded by .ci/vipune/build.sh), in words:
    the binary runs that edit, vipune-lib does not. A lane that records none (the tests' fake)
    names none."""
    lane = report["provenance"].get("lane") or {}
    copies = ((lane.get("built") or {}).get("sources") or {}).get("copies") or []
    return [f"vipune-lib copies {copied(c)}, which this source "
            f"{'changes' if c.get('source') else 'no longer has'} ({c['what']}; the copy: {c['copied_to']}): "
            "a stale copy: the binary runs this source's edit there, vipune-lib the code it copied, so its "
            "numbers do not follow that edit" for c in copies if not c.get("same")]


def copied(copy: Mapping[str, Any]) -> str:
    """What a copy copies: an item of a file (`fn execute` from src/commands/mod.rs) or a whole file."""
    return f"`{copy['item']}` from {copy['file']}" if copy.get("item") else copy["file"]


def model_line(model: Mapping[str, Any]) -> str:
    """The model: which files, where they came from, and whether they are the pinned bytes of the
    model they are laid out as (provenance.model, stages.report.report.model_provenance)."""
    name = f"{model['repo_id']}@{model['revision'][:12]}"
    files = f"{name} `{model['file']}` (sha256 {model['files'][model['file']][:12]})"
    where = f"files from {model['path']} laid out as {files}" if model["path"] else f"{files}, downloaded"
    line = f"model: {where}, {model['pooling']} pooling + L2"
    if model["pinned"] is None:
        return line + f": {name} has no pins, so these bytes are recorded, not checked"
    if model["pinned"]:
        return line + f": the pinned bytes of {name}"
    pins = model["pins"]
    differ = "; ".join(f"`{file}` sha256 {pins[file]['pinned'][:12]}" for file in sorted(pins)
                       if pins[file]["found"] != pins[file]["pinned"])
    return (line + f": not the pinned bytes of {name} (pinned: {differ}): numbers are not comparable with "
            "runs on the pinned model")


def dataset_line(report: Report) -> str:
    data = report["provenance"]["dataset"]
    return (f"dataset {data.get('repo_id') or 'local file'} {data.get('filename') or ''} "
            f"(sha256 {data['sha256'][:12]}): {report['pairs']} pairs")


def corpus_line(report: Report) -> str | None:
    corpus = report.get("corpus")
    if not corpus:
        return None
    sha = f", sha256 {corpus['sha256'][:12]}…" if corpus.get("sha256") else ""
    return f"corpus: {corpus['preset'] or corpus['release']} ({corpus['source']}{sha}): {corpus['note']}"


def scored(report: Report) -> list[str]:
    """Every line of what was scored (report.md's and the HTML pages' list)."""
    return [line for line in (vipune_line(report), lane_line(report), model_line(report["provenance"]["model"]),
                              dataset_line(report), corpus_line(report), f"protocol: {report['protocol']}") if line]


def identity(report: Report) -> list[str]:
    """The lines a terminal shows first: the build, the model, the data."""
    return [line for line in (vipune_line(report, short=True), lane_line(report),
                              model_line(report["provenance"]["model"]),
                              corpus_line(report) or dataset_line(report)) if line]
