"""explain: why a question ranked as it did, from a finished run's files (no search runs again):
the question, each vipune build's top 10 side by side with every hit's rank and score in vipune's
semantic arm and BM25 arm and its fused score, and where each gold session outside the top 10
stood in each arm.

The arms are what vipune's own hybrid search fused, recorded by the lib lane inside its
``rrf_fusion`` (core.lane_arms). Each build's are checked against the list they explain: their RRF
fusion (the k the vipune-lane recorded, ranks from 1, ties to the smaller id, as src/rrf.rs fuses) must
give vipune's hybrid list, and that list collapsed to sessions must be the run's; a mismatch is
named (the question and the build), never shown as an explanation. The report explains the pairs
an edit moved and the worst pairs the same way (report.json's ``explanations``), and
stages.report.sections.explanations words every explanation.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vipune_eval.core import lane_arms, paths
from vipune_eval.core.io import read_json, read_parquet, read_rows_with_ids
from vipune_eval.core.lane_arms import Hits, PersonaArms
from vipune_eval.core.persona import first_documents, row_id
from vipune_eval.core.report_inputs import ExplainedBuild, Manifest, under
from vipune_eval.errors import EvalError
from vipune_eval.registry.lanes import BINARY, LIB
from vipune_eval.stages.report.document import Bullets, Table, one_line, plain
from vipune_eval.stages.report.report_json import ExplainedColumn, Explanation, Explanations, Report
from vipune_eval.stages.report.sections import explanations as words
from vipune_eval.stages.report.sections.misses import worst_pairs
from vipune_eval.stages.report.summary import aligned

TOP, SNIPPET = words.TOP, words.SNIPPET  # the hits shown per build, the characters of a session's text


# ---------------------------------------------------------------- vipune's fusion, and the check


def rrf(arms: list[Hits], k: float, row_ids: list[str]) -> list[tuple[int, float]]:
    """vipune's rrf_fusion (src/rrf.rs) of rows: each row's score is Σ 1/(k + rank) over the lists
    it is in, ranks from 1, added in list order; best first, ties to the smaller id."""
    fused: dict[int, float] = {}
    for hits in arms:
        for rank, (row, _) in enumerate(hits, start=1):
            fused[row] = fused.get(row, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda item: (-item[1], row_ids[item[0]]))


def mismatch(arms: PersonaArms, row_ids: list[str], docs: list[str], ranked: list[str]) -> str | None:
    """Why ``arms`` do not explain the list, or None: their fusion must give vipune's hybrid list
    (rows and scores), and that list, collapsed to documents, the run's ``ranked``."""
    assert arms.k is not None
    fused = rrf([arms.semantic, arms.bm25], arms.k, row_ids)
    for rank, want in enumerate(arms.hybrid, start=1):
        got = fused[rank - 1] if rank <= len(fused) else None
        if got is None or got[0] != want[0] or want[1] is None or not math.isclose(got[1], want[1], rel_tol=1e-12):
            fusion = f"{docs[got[0]]} ({got[1]:.6f})" if got else "nothing"
            return (
                f"the RRF fusion (k = {arms.k:g}) of the recorded arms gives {fusion} at rank {rank}, where "
                f"vipune's hybrid search returned {docs[want[0]]} ({_score(want[1])})"
            )
    collapsed = first_documents((docs[row] for row, _ in arms.hybrid), len(ranked))
    if collapsed != ranked:
        return (
            f"the recorded hybrid list ({', '.join(collapsed[:TOP])}) is not the run's "
            f"({', '.join(ranked[:TOP])}): the arms file and the run file come from different searches"
        )
    return None


def _score(value: float | None) -> str:
    return "no score" if value is None else f"{value:.6f}"


# ---------------------------------------------------------------- one question


@dataclass(frozen=True)
class Pair:
    """A question as the filter wrote it, with its rows: their ids, documents and texts' ids."""

    question_id: str
    question: str
    question_type: str
    gold: list[str]
    row_ids: list[str]
    docs: list[str]
    text_ids: list[str]


@dataclass(frozen=True)
class BuildLists:
    """A build's lists of one question: the lib lane's and the binary's (the run's documents, best
    first; None where the build has no such run, or it failed the pair) and the lib lane's arms
    (None, and ``missing`` says why, where there are none)."""

    build: str
    lib: list[str] | None
    binary: list[str] | None
    arms: PersonaArms | None
    missing: str | None = None


def _positions(hits: Hits, docs: list[str]) -> dict[str, list[Any]]:
    """Document → [rank, score] of its first row in a list."""
    out: dict[str, list[Any]] = {}
    for rank, (row, score) in enumerate(hits, start=1):
        out.setdefault(docs[row], [rank, score])
    return out


def explain_build(pair: Pair, lists: BuildLists) -> ExplainedColumn:
    """One build's column of an explanation."""
    ranked = lists.lib if lists.lib is not None else lists.binary
    out: ExplainedColumn = {
        "build": lists.build,
        "retriever": LIB.hybrid if lists.lib is not None else BINARY.hybrid,
        "k": None,
        "arms": lists.missing,
        "mismatch": None,
        "failed": ranked is None,
        "binary": None,
        "top": [],
        "gold_outside": [],
    }
    if ranked is None:
        return out
    arms = lists.arms if lists.lib is not None else None
    if arms is not None and arms.note:
        out["arms"], arms = arms.note, None
    elif arms is not None:
        out["k"] = arms.k
        out["mismatch"] = mismatch(arms, pair.row_ids, pair.docs, lists.lib or [])
    semantic = _positions(arms.semantic, pair.docs) if arms else {}
    bm25 = _positions(arms.bm25, pair.docs) if arms else {}
    fused = {doc: score for doc, (_, score) in _positions(arms.hybrid, pair.docs).items()} if arms else {}
    gold = set(pair.gold)
    out["top"] = [
        {"doc": doc, "gold": doc in gold, "semantic": semantic.get(doc), "bm25": bm25.get(doc), "fused": fused.get(doc)}
        for doc in ranked[:TOP]
    ]
    out["gold_outside"] = [
        {"doc": doc, "semantic": semantic.get(doc), "bm25": bm25.get(doc)}
        for doc in pair.gold
        if doc not in ranked[:TOP]
    ]
    if lists.lib is not None and lists.binary is not None and lists.binary[:TOP] != lists.lib[:TOP]:
        out["binary"] = lists.binary[:TOP]
    return out


def explain(pair: Pair, builds: list[BuildLists], texts: dict[str, str]) -> Explanation:
    """A question's explanation in every build (report_json's ``Explanation``); ``texts``: text id
    → text, holding at least the texts of the sessions shown."""
    columns = [explain_build(pair, lists) for lists in builds]
    shown = dict.fromkeys([*(hit["doc"] for c in columns for hit in c["top"]), *pair.gold])
    first_text: dict[str, str] = {}
    for doc, text_id in zip(pair.docs, pair.text_ids):
        first_text.setdefault(doc, text_id)
    return {
        "question_id": pair.question_id,
        "question": pair.question,
        "question_type": pair.question_type,
        "gold": pair.gold,
        "builds": columns,
        "texts": {doc: one_line(texts.get(first_text.get(doc, ""), ""), SNIPPET) for doc in shown},
    }


# ---------------------------------------------------------------- reading a finished run


def _rows_of(table: Any, question_ids: set[str]) -> dict[str, dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    wanted = table.filter(pc.is_in(table.column("question_id"), pa.array(sorted(question_ids), pa.string())))
    return {row["question_id"]: row for row in wanted.to_pylist()}


def explanations(
    manifest: Manifest,
    question_ids: list[str],
    at: Callable[[str], Path],
    metrics: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Explanation]:
    """The explanations of ``question_ids`` (pairs of the primary view) from a run's files, named
    by its manifest; ``at``: where a path of the manifest is; ``metrics``: the metrics files
    already read, by their manifest path."""
    import pyarrow as pa

    if not question_ids:
        return {}
    view, wanted = manifest["views"][0], set(question_ids)
    pairs = _rows_of(read_parquet(at(view["pairs"]), ["question_id", "question", "question_type", "gold"]), wanted)
    rows = _rows_of(read_parquet(at(view["rows"]), ["question_id", "row_keys", "row_docs", "row_text_ids"]), wanted)
    known = {
        qid: Pair(
            qid,
            pairs[qid]["question"],
            pairs[qid]["question_type"],
            pairs[qid]["gold"],
            [row_id(qid, key) for key in rows[qid]["row_keys"]],
            rows[qid]["row_docs"],
            rows[qid]["row_text_ids"],
        )
        for qid in question_ids
        if qid in pairs and qid in rows
    }
    read = dict(metrics or {})

    def ranked(path: str | None) -> dict[str, list[str]] | None:
        if path is None:
            return None
        if path not in read:
            read[path] = read_json(at(path))
        return {qid: row["ranked"] for qid, row in read[path]["per_query"].items()}

    columns = []
    for entry in manifest.get("explained", []):
        files = [at(p) for p in entry["arms"]]
        arms = lane_arms.read([f for f in files if f.is_file()], wanted) if files else {}
        missing = _without_arms(entry, files)
        columns.append((entry["build"], ranked(entry["lib"]), ranked(entry["binary"]), arms, missing))
    text_ids = {t for p in known.values() for t in p.text_ids}
    table = read_rows_with_ids(at(view["texts"]), ["text_id", "text"], pa.array(sorted(text_ids), pa.string()))
    texts = dict(zip(table.column("text_id").to_pylist(), table.column("text").to_pylist()))
    out = {}
    for qid, pair in known.items():
        builds = [
            BuildLists(
                build,
                lib.get(qid) if lib is not None else None,
                binary.get(qid) if binary is not None else None,
                arms.get(qid),
                missing
                or (None if qid in arms or lib is None or qid not in lib else f"the arms file has no entry for {qid}"),
            )
            for build, lib, binary, arms, missing in columns
        ]
        out[qid] = explain(pair, builds, texts)
    return out


def _without_arms(entry: ExplainedBuild, files: list[Path]) -> str | None:
    """Why a build has no arms at all, or None."""
    if entry["lib"] is None:
        return (
            f"no arms: {entry['build']} has no lib-lane run here (the arms come from {LIB.hybrid}: add it to "
            f"`retrievers`; a vipune.compare build runs it only where {BINARY.hybrid} is not configured)"
        )
    absent = [str(f) for f in files if not f.is_file()]
    if absent:
        return (
            f"no arms: {', '.join(absent)} {'is' if len(absent) == 1 else 'are'} not there (a run made before "
            "vipune-eval recorded them: run the workflow again and its search_vipune_lib jobs record them)"
        )
    return None


# ---------------------------------------------------------------- the report's explanations


def report_explanations(report: Report, manifest: Manifest, metrics: dict[str, dict[str, Any]]) -> Explanations:
    """The explanations report.json holds: every pair a build of vipune.compare moved (gained or
    lost gold sessions against the primary) and the worst pairs the diagnostics list; none
    without a vipune build."""
    moved = list(dict.fromkeys(c["question_id"] for b in report["builds"][1:] for c in b["changes"]))
    worst = [r["question_id"] for r in worst_pairs(report)]
    if not manifest.get("explained"):
        return {"moved": [], "worst": [], "questions": {}}
    return {
        "moved": moved,
        "worst": worst,
        "questions": explanations(manifest, list(dict.fromkeys(moved + worst)), Path, metrics),
    }


# ---------------------------------------------------------------- the command


def run_explain(question_id: str, run: Path) -> None:
    """Print why ``question_id`` ranked as it did in the finished run whose results folder is ``run``."""
    manifest_file = under(run, paths.REPORT_MANIFEST)
    if not manifest_file.is_file():
        raise EvalError(
            f"{run} holds no finished run: {manifest_file} is not there",
            fix="give --run the results folder of a run (the folder a workflow run writes; "
            "default: results/ of the current folder)",
        )
    manifest: Manifest = read_json(manifest_file)
    if not manifest.get("explained"):
        raise EvalError(
            f"the run in {run} has no arms of vipune's hybrid search to explain a question with "
            "(it searched with no vipune build, or was made before vipune-eval recorded them)",
            fix="add vipune-lib to `retrievers` (or keep it there) and run the workflow again: its "
            "search_vipune_lib jobs record the arms each hybrid search fused",
        )
    questions = read_parquet(under(run, manifest["views"][0]["pairs"]), ["question_id"])
    known = questions.column("question_id").to_pylist()
    if question_id not in known:
        near = difflib.get_close_matches(question_id, known, n=5, cutoff=0.5)
        raise EvalError(
            f"{question_id} is not a question of the run in {run} "
            f"({len(known)} questions, in {under(run, manifest['views'][0]['pairs'])})",
            fix=(f"did you mean {' or '.join(near)}?" if near else "give one of its question ids")
            + f" (`vipune-eval explain QUESTION_ID --run {run}`)",
        )
    found = explanations(manifest, [question_id], lambda path: under(run, path))
    if all(column["arms"] for column in found[question_id]["builds"]):
        raise EvalError(
            f"the run in {run} recorded no arms of vipune's hybrid search for {question_id}: "
            + "; ".join(str(column["arms"]) for column in found[question_id]["builds"]),
            fix="add vipune-lib to `retrievers` (or keep it there) and run the workflow again: its "
            "search_vipune_lib jobs record the arms each hybrid search fused",
        )
    print(text(found[question_id]), end="")


def text(explanation: Explanation) -> str:
    """An explanation as a terminal shows it: the report's words (sections.explanations), plain."""
    section = words.explanation(explanation)
    lines = [plain(section.title), ""]
    for block in section.blocks:
        if isinstance(block, Table):
            lines += aligned(Table([plain(c) for c in block.columns], [[plain(c) for c in row] for row in block.rows]))
        elif isinstance(block, Bullets):
            if block.lead:
                lines.append(plain(block.lead))
            for item in block.items:
                lines += [f"  {plain(item.text)}", *(f"    {plain(s)}" for s in item.sub)]
        else:
            lines.append(plain(block.text))
        lines.append("")
    return "\n".join(lines)
