"""The datasets: LongMemEval's releases as presets, chosen by ``dataset.preset`` (one owner).

``xiaowu0162/longmemeval`` is the paper's release (its author now marks it deprecated); it serves
its files without an extension. ``xiaowu0162/longmemeval-cleaned`` is the cleaned re-release the
LongMemEval README now names the official one. M, S and oracle hold the same 500 questions (30 of
them abstention, ``_abs``) with different haystacks: M about 500 sessions, S about 48, oracle the
evidence sessions only. Each preset is pinned to a commit, and to the sha256 and size of its file
there, as public projects that downloaded them recorded (docs/configuration.md names them); the
counts of the cleaned files are not checked (``expected: None``): no run here could read them, a
run records what it found. A local ``dataset.path`` is identified by its bytes: it is a preset's
release only when its sha256 is that preset's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vipune_eval.core.report_inputs import Corpus
from vipune_eval.errors import EvalError

PAPER_COUNTS = {"instances": 500, "abstention": 30, "pairs": 470}


@dataclass(frozen=True)
class DatasetPreset:
    name: str
    repo_id: str
    filename: str  # as the hub serves it
    revision: str  # the pinned commit
    sha256: str  # of the file at that commit
    size: int | None  # its bytes, where a source recorded them
    corpus: str  # "original" (the paper's) or "cleaned"
    expected: dict[str, int] | None  # counts the filter must find; None: not checked


ORIGINAL, CLEANED = "xiaowu0162/longmemeval", "xiaowu0162/longmemeval-cleaned"
ORIGINAL_AT = "2ec2a557f339b6c0369619b1ed5793734cc87533"
CLEANED_AT = "98d7416c24c778c2fee6e6f3006e7a073259d48f"
ORACLE_SHA256 = "821a2034d219ab45846873dd14c14f12cfe7776e73527a483f9dac095d38620c"  # same bytes in both
PRESETS: dict[str, DatasetPreset] = {
    p.name: p
    for p in (
        DatasetPreset(
            "m",
            ORIGINAL,
            "longmemeval_m",
            ORIGINAL_AT,
            "fb5413e3b077c62927daab794836991a2fcfa61ceacab57dc679fb02daaff2d9",
            2_745_274_681,
            "original",
            PAPER_COUNTS,
        ),
        DatasetPreset(
            "s",
            ORIGINAL,
            "longmemeval_s",
            ORIGINAL_AT,
            "08d8dad4be43ee2049a22ff5674eb86725d0ce5ff434cde2627e5e8e7e117894",
            278_025_796,
            "original",
            PAPER_COUNTS,
        ),
        DatasetPreset(
            "oracle", ORIGINAL, "longmemeval_oracle", ORIGINAL_AT, ORACLE_SHA256, 15_388_478, "original", PAPER_COUNTS
        ),
        DatasetPreset(
            "m-cleaned",
            CLEANED,
            "longmemeval_m_cleaned.json",
            CLEANED_AT,
            "9d79e5524794a2e6900a3aa9cb7d9152c5a3e8319c9a87c25494ba1eacee495f",
            2_737_100_077,
            "cleaned",
            None,
        ),
        DatasetPreset(
            "s-cleaned",
            CLEANED,
            "longmemeval_s_cleaned.json",
            CLEANED_AT,
            "d6f21ea9d60a0d56f34a05b609c79c88a451d2ae03597821ea3d5a9678c3a442",
            277_383_467,
            "cleaned",
            None,
        ),
        DatasetPreset(
            "oracle-cleaned", CLEANED, "longmemeval_oracle.json", CLEANED_AT, ORACLE_SHA256, 15_388_478, "cleaned", None
        ),
    )
}
DEFAULT = "m"


def resolve(dataset: dict[str, Any], local_sha256: str | None = None) -> dict[str, Any]:
    """The ``dataset:`` config block with the preset's repository, file, pins and expected counts
    filled in where the config does not set them (an explicit ``expected: null`` switches the
    count check off). The preset's sha256 and size apply only to its own file at its own commit:
    a config naming another repository, file or revision pins what it names (``dataset.sha256``)
    or nothing. A local ``dataset.path`` (whose bytes hash to ``local_sha256``) is checked only
    against a ``dataset.sha256`` the config gives, and the preset's counts are expected of it
    only when it has the preset's bytes."""
    name = dataset.get("preset") or DEFAULT
    if name not in PRESETS:
        raise EvalError(
            f"dataset.preset: unknown dataset {name!r} (presets: {', '.join(PRESETS)}; "
            "or set dataset.path to a local LongMemEval-format file)"
        )
    preset = PRESETS[name]
    out = dict(dataset)
    out["preset"] = name
    out["repo_id"] = dataset.get("repo_id") or preset.repo_id
    out["filename"] = dataset.get("filename") or preset.filename
    out["revision"] = dataset.get("revision") or preset.revision
    own = (out["repo_id"], out["filename"], out["revision"]) == (preset.repo_id, preset.filename, preset.revision)
    out["sha256"] = dataset.get("sha256") or (preset.sha256 if own and not dataset.get("path") else None)
    out["size"] = dataset.get("size") or (preset.size if own and out["sha256"] == preset.sha256 else None)
    if "expected" not in dataset:
        mine = not dataset.get("path") or (local_sha256 and identify(local_sha256) == preset)
        out["expected"] = preset.expected if mine else None
    return out


def identify(sha256: str, named: tuple[str, str] | None = None) -> DatasetPreset | None:
    """The preset whose pinned file has these bytes; where two share them (the oracle's two
    releases), the one ``named`` (repository, file), else the paper's."""
    same = [p for p in PRESETS.values() if p.sha256 == sha256.lower()]
    return next((p for p in same if (p.repo_id, p.filename) == named), same[0] if same else None)


NOTES = {
    "original": "the paper's release (the corpus its published numbers used; its author now "
    "points to a cleaned re-release, the presets m-cleaned, s-cleaned, oracle-cleaned)",
    "cleaned": "the cleaned re-release: numbers published on the paper's original corpus are not directly comparable",
    "custom": "not a pinned release (another repository, file or sha256 than the presets')",
    "local": "a local file that is none of the pinned releases (its sha256 matches no "
    "preset): numbers are not comparable with published ones",
}


def corpus(dataset: dict[str, Any], local_sha256: str | None = None) -> Corpus:
    """What the report says about the data: the release (a local file's by its bytes,
    ``local_sha256``), the file, its pins, and whether the paper's published figures were
    measured on the same corpus."""
    pinned = local_sha256 if dataset.get("path") else dataset.get("sha256")
    if pinned:
        preset = identify(pinned, (dataset["repo_id"], dataset["filename"]))
    else:  # a download with no pin: the file is named, its bytes are not known before the run
        preset = next(
            (p for p in PRESETS.values() if (p.repo_id, p.filename) == (dataset["repo_id"], dataset["filename"])), None
        )
    release = preset.corpus if preset else ("local" if dataset.get("path") else "custom")
    repo_id = preset.repo_id if preset else (None if dataset.get("path") else dataset["repo_id"])
    filename = (
        preset.filename if preset else (Path(dataset["path"]).name if dataset.get("path") else dataset["filename"])
    )
    if dataset.get("path"):
        source = f"{repo_id} {filename}, a local copy" if preset else f"the local file {filename}"
    else:
        source = f"{repo_id}@{str(dataset.get('revision'))[:12]} {filename}"
    return {
        "preset": preset.name if preset else None,
        "release": release,
        "repo_id": repo_id,
        "filename": filename,
        "revision": dataset.get("revision"),
        "sha256": pinned,
        "local_path": bool(dataset.get("path")),
        "source": source,
        "same_as_paper": bool(pinned) and preset is not None and preset.name == "m",
        "note": NOTES[release] + ("" if pinned else " (unpinned: its bytes are not checked)"),
    }
