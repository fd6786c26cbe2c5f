"""The datasets: LongMemEval's releases as presets, chosen by ``dataset.preset`` (one owner).

``xiaowu0162/longmemeval`` is the paper's release; ``xiaowu0162/longmemeval-cleaned`` its
cleaned re-release (the one other harnesses now download). M, S and oracle hold the same 500
questions (30 of them abstention, ``_abs``) with different haystacks: M about 500 sessions, S
about 48, oracle the evidence sessions only. The counts of the cleaned files are not checked
here (``expected: None``): they were not available to verify; a run records what it found.
A local ``dataset.path`` replaces the download and keeps the preset's expected counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vipune_eval.errors import EvalError

PAPER_COUNTS = {"instances": 500, "abstention": 30, "pairs": 470}


@dataclass(frozen=True)
class Preset:
    name: str
    repo_id: str
    filename: str
    corpus: str                       # "original" (the paper's) or "cleaned"
    expected: dict[str, int] | None   # counts the filter must find; None: not checked


ORIGINAL, CLEANED = "xiaowu0162/longmemeval", "xiaowu0162/longmemeval-cleaned"
PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("m", ORIGINAL, "longmemeval_m.json", "original", PAPER_COUNTS),
    Preset("s", ORIGINAL, "longmemeval_s.json", "original", PAPER_COUNTS),
    Preset("oracle", ORIGINAL, "longmemeval_oracle.json", "original", PAPER_COUNTS),
    Preset("m-cleaned", CLEANED, "longmemeval_m_cleaned.json", "cleaned", None),
    Preset("s-cleaned", CLEANED, "longmemeval_s_cleaned.json", "cleaned", None),
    Preset("oracle-cleaned", CLEANED, "longmemeval_oracle.json", "cleaned", None),
)}
DEFAULT = "m"


def resolve(dataset: dict[str, Any]) -> dict[str, Any]:
    """The ``dataset:`` config block with the preset's repository, file and expected counts
    filled in where the config does not set them (an explicit ``expected: null`` switches the
    count check off)."""
    name = dataset.get("preset") or DEFAULT
    if name not in PRESETS:
        raise EvalError(f"dataset.preset: unknown dataset {name!r} (presets: {', '.join(PRESETS)}; "
                        "or set dataset.path to a local LongMemEval-format file)")
    preset = PRESETS[name]
    out = dict(dataset)
    out["preset"] = name
    out["repo_id"] = dataset.get("repo_id") or preset.repo_id
    out["filename"] = dataset.get("filename") or preset.filename
    if "expected" not in dataset:
        out["expected"] = preset.expected
    return out


def corpus(dataset: dict[str, Any]) -> dict[str, Any]:
    """What the report says about the data: the preset, its release, the file."""
    preset = PRESETS[dataset["preset"]]
    if (dataset["repo_id"], dataset["filename"]) != (preset.repo_id, preset.filename):
        preset = next((p for p in PRESETS.values()
                       if (p.repo_id, p.filename) == (dataset["repo_id"], dataset["filename"])), None)
    release = preset.corpus if preset else "custom"
    return {"preset": preset.name if preset else None, "release": release,
            "repo_id": dataset["repo_id"], "filename": dataset["filename"],
            "local_path": bool(dataset.get("path")),
            "note": {"original": "the paper's release (the corpus its published numbers used)",
                     "cleaned": "the cleaned re-release: numbers published on the paper's original "
                                "corpus are not directly comparable",
                     "custom": "a repository or file other than the presets"}[release]}
