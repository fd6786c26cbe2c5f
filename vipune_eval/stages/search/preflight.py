"""preflight: before any persona runs, check that the binary honours the contract the harness
relies on (docs/vipune-contract.md) and embeds exactly as the cached Parquet vectors were
embedded: its passages (``add``, read back by ``export``) and its queries (``search`` embeds a
query with the Query role and its prefix; the similarity a ``--no-hybrid`` search gives a row
holding the harness's vector of that very text is the cosine of the two). Each check is named; a
binary that fails one is refused with what was expected and what it gave, and the report's
provenance lists every check.

The fusion checks use probe rows with known vectors: every probe vector is ``cos θ · q + sin θ · u``
for the harness's query vector q and one fixed direction u orthogonal to it, with θ from 0.1 to
π − 0.1. vipune's own query vector may differ from q by the parity tolerance (cosine ≥ 0.999, an
angle under 0.045), which shifts every θ by the same amount and so keeps the semantic ranks, and
therefore the exact RRF scores, known.

A build whose fused scores all fit one other RRF k is named for that (fusion drift: "RRF k
differs"), and the later checks expect that k's scores, so they test only what they are about
(the AND query, the candidate pools, the ties) rather than failing on every score.
"""

from __future__ import annotations

import base64
import json
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vipune_eval.core.build_records import PreflightCheck, PreflightResult
from vipune_eval.core.io import log, write_json
from vipune_eval.core.model_files import ModelFiles
from vipune_eval.core.persona import Persona, row_id
from vipune_eval.errors import EvalError
from vipune_eval.stages.embed.embed import load_model
from vipune_eval.vipune.binary import planned_binary
from vipune_eval.vipune.client import Vipune, VipuneError
from vipune_eval.vipune.contract import EXIT_TOO_LONG, MAX_SEARCH_LIMIT, RRF_K
from vipune_eval.vipune.import_format import import_lines
from vipune_eval.vipune.settings import VipuneSettings

QUERY = "zebra violin"
MATCH = "the zebra played a violin at the harbour"  # holds every query word
FILLER = "a quiet morning walk in the park with the dog number {n}"
PARITY_TEXTS = [
    "I moved to Lisbon last spring and started learning Portuguese.",
    "user: what should I cook tonight?\nassistant: try a mushroom risotto.",
    "Remember that my dentist appointment is on Friday at 9.",
]
# Questions as LongMemEval asks them: their vectors, as the harness embeds every question (as its
# passages: no prefix), against vipune's query vectors of the same texts.
QUERY_PARITY_TEXTS = [
    "What did I say about my dentist appointment?",
    "Which language did I start learning after I moved?",
    QUERY,
]
QUERY_PARITY_PROJECT = "preflight-query"
MIN_PARITY_COSINE = 0.999
TOLERANCE = 1e-6
OLD = "2024-01-01T00:00:00Z"
NEW = "2024-06-01T00:00:00Z"


class CheckFailed(EvalError):
    pass


@dataclass
class Probe:
    """One project of the probe database: rows with known semantic ranks."""

    project: str
    texts: list[str]
    thetas: list[float]  # angle to the query: semantic rank follows it
    created_at: list[str]
    keys: list[str]

    def row(self, i: int) -> str:
        return row_id(self.project, self.keys[i])


def probe(
    project: str,
    n: int,
    match_at: dict[int, str] | None = None,
    created_at: list[str] | None = None,
    keys: list[str] | None = None,
    thetas: list[float] | None = None,
) -> Probe:
    """``n`` rows at semantic ranks 1..n (row i at rank i + 1); ``match_at`` gives some rows a text."""
    texts = [FILLER.format(n=i) for i in range(n)]
    for i, text in (match_at or {}).items():
        texts[i] = text
    return Probe(
        project,
        texts,
        thetas or [0.1 + i * (math.pi - 0.2) / max(n - 1, 1) for i in range(n)],
        created_at or [OLD] * n,
        keys or [f"{i:03d}" for i in range(n)],
    )


def probe_personas(probes: list[Probe], query_vector: np.ndarray) -> list[Persona]:
    q = query_vector.astype(np.float64)
    q /= np.linalg.norm(q)
    u = np.random.default_rng(0).normal(size=q.shape)
    u -= (u @ q) * q
    u /= np.linalg.norm(u)
    out = []
    for p in probes:
        vectors = np.array([math.cos(t) * q + math.sin(t) * u for t in p.thetas], dtype=np.float32)
        out.append(
            Persona(
                question_id=p.project,
                question=QUERY,
                row_ids=[p.row(i) for i in range(len(p.texts))],
                session_ids=p.keys,
                created_at=p.created_at,
                texts=p.texts,
                vectors=vectors,
                query_vector=query_vector,
            )
        )
    return out


def rrf(*ranks: int | None, k: float = RRF_K) -> float:
    return sum(1.0 / (k + r) for r in ranks if r is not None)


def fitted_k(seen: list[tuple[str, float]], semantic_only: dict[str, int]) -> float | None:
    """The one RRF k that the scores of rows ranked by the semantic arm alone fit
    (score = 1 / (k + rank)), or None when they fit none."""
    ks = [
        1.0 / s - semantic_only[rid]
        for rid, s in seen
        if rid in semantic_only and isinstance(s, (int, float)) and s > 0
    ]
    if len(ks) < 2 or max(ks) - min(ks) > 1e-3:
        return None
    return round(sum(ks) / len(ks), 3)


class Preflight:
    """Runs the checks. With ``enforce`` a failed ranking check refuses the binary; without, it
    is recorded (a maintainer comparing a build whose search was changed on purpose). Parity,
    the commands and the import are always enforced: without them no number means anything."""

    def __init__(self, vipune: Vipune, settings: VipuneSettings, db: Path, enforce: bool = True) -> None:
        self.vipune, self.settings, self.db, self.enforce = vipune, settings, db, enforce
        self.findings: list[PreflightCheck] = []
        self.k: float = RRF_K  # the RRF k the fused scores are expected to fit

    def record(
        self, check: str, expected: Any, seen: Any, passed: bool, always: bool = False, drift: str | None = None
    ) -> None:
        """One check's finding; ``drift`` names what a failure is, in words, when that is known."""
        self.findings.append(
            {
                "check": check,
                "expected": expected,
                "seen": seen,
                "passed": passed,
                **({"drift": drift} if drift and not passed else {}),
            }
        )
        if not passed and (self.enforce or always):
            raise CheckFailed(
                f"check {check!r} failed: " + (f"{drift}; " if drift else "") + f"expected {expected}, seen {seen}"
            )

    def rrf(self, *ranks: int | None) -> float:
        return rrf(*ranks, k=self.k)

    def search(self, project: str, limit: int, hybrid: bool = True) -> list[tuple[Any, Any]]:
        """(id, similarity) of each hit as vipune printed them: a drifted output may hold anything."""
        hits, _ = self.vipune.search(
            self.db, project, QUERY, self.settings.search_flags(limit, hybrid), limit, "preflight"
        )
        return [(h.get("id"), h.get("similarity")) for h in hits]

    def scores_match(
        self, check: str, project: str, limit: int, expected: list[tuple[str, float]], hybrid: bool = True
    ) -> None:
        seen = self.search(project, limit, hybrid)
        self.record(check, _show(expected), _show(seen), _same(seen, expected))


def _show(ranking: list[tuple[Any, Any]]) -> list[str]:
    return [f"{rid} {score:.6f}" if isinstance(score, (int, float)) else f"{rid} {score!r}" for rid, score in ranking]


def check_commands(pre: Preflight, version: str) -> None:
    missing = [c for c in ("import", "export") if not pre.vipune.has_command(c, "preflight")]
    if missing:
        raise CheckFailed(
            f"vipune {version} has no {' or '.join(missing)} command (they arrived after vipune 0.9.1)",
            fix="upgrade: `cargo install vipune --force`, or build a current checkout of randomm/vipune",
        )
    pre.findings.append({"check": "commands", "expected": "import and export", "seen": "present", "passed": True})


def check_import(pre: Preflight, personas: list[Persona], jsonl: Path) -> None:
    lines = [import_lines(p) for p in personas]
    header = json.loads(lines[0][0])
    header["rows"] = sum(len(p.row_ids) for p in personas)
    jsonl.write_text(
        "\n".join([json.dumps(header), *(line for ls in lines for line in ls[1:])]) + "\n", encoding="utf-8"
    )
    out = pre.vipune.import_file(pre.db, jsonl, "preflight")
    pre.record(
        "import",
        {"inserted": header["rows"], "skipped": 0},
        {"inserted": out.get("inserted"), "skipped": out.get("skipped", 0)},
        out.get("inserted") == header["rows"] and out.get("skipped", 0) == 0,
        always=True,
    )
    doctor = pre.vipune.doctor_fts(pre.db, "preflight")
    pre.record(
        "fts_in_sync",
        "doctor --fts in_sync true",
        f"in_sync {doctor.get('in_sync')!r}",
        doctor.get("in_sync") is True,
        always=True,
    )


def check_rrf_k(pre: Preflight, probe: Probe) -> None:
    """RRF k = 25, ranks from 1: the row at semantic rank 3 that BM25 ranks 1 scores 1/28 + 1/26,
    every other row 1/(25 + its semantic rank). Scores that all fit another k are fusion drift:
    named so, and the later checks expect that k's scores."""
    n = len(probe.texts)

    def fused(k: float) -> list[tuple[str, float]]:
        return sorted(
            [(probe.row(i), rrf(i + 1, 1 if i == 2 else None, k=k)) for i in range(n)],
            key=lambda item: (-item[1], item[0]),
        )

    expected = fused(RRF_K)
    seen = pre.search(probe.project, n)
    if _same(seen, expected):
        pre.record("rrf_k25_ranks_from_1", _show(expected), _show(seen), True)
        return
    k = fitted_k(seen, {probe.row(i): i + 1 for i in range(n) if i != 2})
    drift = None
    if k is not None and _same(seen, fused(k)):
        order = "same order" if [r for r, _ in seen] == [r for r, _ in expected] else "another order"
        drift = (
            f"RRF k differs: {order}, other scores (vipune's fused scores fit k = {k:g}; the "
            f"contract and the hybrid mirrors use k = {RRF_K})"
        )
        pre.k = k
    pre.record("rrf_k25_ranks_from_1", _show(expected), _show(seen), False, drift=drift)


def _same(seen: list[tuple[Any, Any]], expected: list[tuple[str, float]]) -> bool:
    return len(seen) == len(expected) and all(
        a == b and isinstance(s, (int, float)) and abs(s - t) <= TOLERANCE for (a, s), (b, t) in zip(seen, expected)
    )


def check_fusion(pre: Preflight, rrf_probe: Probe, and_probe: Probe, pool_a: Probe, pool_b: Probe, ties: Probe) -> None:
    check_rrf_k(pre, rrf_probe)
    # AND of every query word: the words sit in two different rows, so BM25 finds nothing and the
    # hybrid order is the semantic (--no-hybrid) order, each row scoring 1/(25 + rank).
    n = len(and_probe.texts)
    semantic = [rid for rid, _ in pre.search(and_probe.project, n, hybrid=False)]
    pre.record(
        "bm25_is_and_of_every_word",
        [and_probe.row(i) for i in range(n)],
        semantic,
        semantic == [and_probe.row(i) for i in range(n)],
    )
    pre.scores_match(
        "bm25_is_and_of_every_word", and_probe.project, n, [(and_probe.row(i), pre.rrf(i + 1)) for i in range(n)]
    )
    # Candidate pool clamp(10 × limit, 50, 10000): with --limit 1 the pool is 50, so the BM25 row
    # at semantic rank 30 scores 1/26 + 1/55; with --limit 5 the pool is 50 and the one at rank
    # 60 is outside it (1/26); with --limit 6 the pool is 60 and it is inside (1/26 + 1/85).
    hit = pre.search(pool_a.project, 1)
    pre.record(
        "candidate_pool_at_least_50",
        _show([(pool_a.row(29), pre.rrf(30, 1))]),
        _show(hit),
        len(hit) == 1 and hit[0][0] == pool_a.row(29) and abs(hit[0][1] - pre.rrf(30, 1)) <= TOLERANCE,
    )
    # Fused ties go to the smaller id: at --limit 5 the BM25 row (semantic rank 60, id …000)
    # and the semantic first row (id …001, newer) both score exactly 1/26.
    top = pre.search(pool_b.project, 5)[:2]
    expected = [(pool_b.row(59), pre.rrf(1)), (pool_b.row(0), pre.rrf(1))]
    pre.record(
        "candidate_pool_10x_limit_and_fused_ties_to_smaller_id",
        _show(expected),
        _show(top),
        [r for r, _ in top] == [r for r, _ in expected] and all(abs(s - pre.rrf(1)) <= TOLERANCE for _, s in top),
    )
    hit = pre.search(pool_b.project, 6)[:1]
    pre.record(
        "candidate_pool_10x_limit",
        _show([(pool_b.row(59), pre.rrf(60, 1))]),
        _show(hit),
        bool(hit) and hit[0][0] == pool_b.row(59) and abs(hit[0][1] - pre.rrf(60, 1)) <= TOLERANCE,
    )
    # Semantic ties: equal vectors keep the newer row first, then import order (not the id).
    seen = [rid for rid, _ in pre.search(ties.project, 3, hybrid=False)]
    want = [ties.row(1), ties.row(2), ties.row(0)]
    pre.record("semantic_ties_newer_then_import_order", want, seen, seen == want)


def check_refusals(pre: Preflight, project: str) -> None:
    long_query = pre.vipune.run(
        pre.vipune.search_args(pre.db, project, "word " * 600, pre.settings.search_flags(10, True)), "preflight"
    )
    pre.record(
        "query_over_512_tokens_exits_3",
        f"exit {EXIT_TOO_LONG}",
        f"exit {long_query.returncode}",
        long_query.returncode == EXIT_TOO_LONG,
    )
    too_many = pre.vipune.run(
        pre.vipune.search_args(pre.db, project, QUERY, pre.settings.search_flags(MAX_SEARCH_LIMIT + 1, True)),
        "preflight",
    )
    pre.record("limit_over_10000_refused", "a non-zero exit", f"exit {too_many.returncode}", too_many.returncode != 0)


def check_parity(pre: Preflight, embed: Callable[[list[str]], np.ndarray], db: Path, export: Path, recipe: str) -> None:
    """vipune's own embedding of probe texts (add, then export) against the harness's."""
    for text in PARITY_TEXTS:
        pre.vipune.add(db, "parity", text, "preflight")
    pre.vipune.export(db, export, "preflight")
    theirs = {}
    for line in export.read_text(encoding="utf-8").split("\n")[1:]:
        if line.strip():
            row = json.loads(line)
            theirs[row["content"]] = np.frombuffer(base64.b64decode(row["embedding"]), "<f4")
    cosines = []
    for text, vector in zip(PARITY_TEXTS, embed(PARITY_TEXTS)):
        if text not in theirs:
            raise CheckFailed(f"`vipune export` did not return the probe row {text!r}")
        other = theirs[text]
        cosines.append(float(np.dot(vector, other) / (np.linalg.norm(vector) * np.linalg.norm(other))))
    if min(cosines) < MIN_PARITY_COSINE:
        raise CheckFailed(
            f"embedding parity failed: vipune's vectors of the probe texts have cosine "
            f"{min(cosines):.4f} (< {MIN_PARITY_COSINE}) with the harness's. The harness embeds with "
            f"{recipe}; vipune embeds with its built-in profile (bge-small-en-v1.5 at its pinned "
            "revision, mean pooling, L2) from HF_HOME. Passage vectors and vipune's query vectors "
            "would not live in the same space",
            fix="set model.* in the config to the files and pooling vipune embeds with",
        )
    pre.findings.append(
        {
            "check": "embedding_parity",
            "expected": f"cosine >= {MIN_PARITY_COSINE}",
            "seen": f"min cosine {min(cosines):.6f} over {len(cosines)} probes",
            "passed": True,
            "min_cosine": min(cosines),
        }
    )


def query_parity_persona(embed: Callable[[list[str]], np.ndarray]) -> Persona:
    """One row per question of QUERY_PARITY_TEXTS, holding the harness's vector of that question."""
    vectors = embed(QUERY_PARITY_TEXTS)
    keys = [f"q{i}" for i in range(len(QUERY_PARITY_TEXTS))]
    return Persona(
        question_id=QUERY_PARITY_PROJECT,
        question=QUERY,
        row_ids=[row_id(QUERY_PARITY_PROJECT, k) for k in keys],
        session_ids=keys,
        created_at=[OLD] * len(keys),
        texts=list(QUERY_PARITY_TEXTS),
        vectors=vectors,
        query_vector=vectors[-1],
    )


def query_drift(cosine: float) -> str:
    """A failed query parity in words: what it is, and what it means for each lane."""
    return (
        f"the query's embedding differs: vipune embeds a search's query with cosine {cosine:.4f} "
        f"(< {MIN_PARITY_COSINE}) to the cached query vectors, which are embedded as passages are "
        "(bge-small has no query prefix); the binary's searches measure its new query embedding, "
        "the lib lane's, on the cached vectors, do not"
    )


def check_query_parity(pre: Preflight, embed: Callable[[list[str]], np.ndarray], db: Path, jsonl: Path) -> None:
    """vipune's own embedding of each question (its search, Query role) against the harness's: a
    ``--no-hybrid`` search of a question scores the row holding the harness's vector of it with
    their cosine (in a database of its own: BM25's statistics span every project of one). Refused
    under enforce, named under record: the binary's numbers then measure another query embedding
    than the lib lane's cached vectors."""
    jsonl.write_text("\n".join(import_lines(query_parity_persona(embed))) + "\n", encoding="utf-8")
    pre.vipune.import_file(db, jsonl, "preflight")
    rows = {text: row_id(QUERY_PARITY_PROJECT, f"q{i}") for i, text in enumerate(QUERY_PARITY_TEXTS)}
    cosines = []
    for text, rid in rows.items():
        hits, _ = pre.vipune.search(
            db, QUERY_PARITY_PROJECT, text, pre.settings.search_flags(len(rows), False), len(rows), "preflight"
        )
        score = next((h.get("similarity") for h in hits if h.get("id") == rid), None)
        if not isinstance(score, (int, float)):
            raise CheckFailed(
                f"`vipune search --no-hybrid` of the probe question {text!r} did not return its "
                f"row {rid} with a similarity (it returned {[h.get('id') for h in hits]})"
            )
        cosines.append(float(score))
    low = min(cosines)
    pre.record(
        "query_embedding_parity",
        f"cosine >= {MIN_PARITY_COSINE}",
        f"min cosine {low:.6f} over {len(cosines)} questions",
        low >= MIN_PARITY_COSINE,
        drift=query_drift(low),
    )
    pre.findings[-1]["min_cosine"] = low


def run_preflight(vipune: VipuneSettings, model: ModelFiles, out: Path, mode: str) -> PreflightResult:
    tmp = vipune.tmp
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tmp = tmp.resolve()
    try:
        binary = planned_binary(vipune, tmp / "bin")  # every check runs this copy of the planned bytes
    except EvalError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    path, expected = binary.shown, binary.fingerprint
    loaded = load_model(model.model_dir, model.file, model.pooling, threads=1)  # as the embed stage embeds

    def embed(texts: list[str]) -> np.ndarray:
        return np.array(list(loaded.embed(texts)), dtype=np.float32)

    pre = Preflight(
        Vipune(binary.path, tmp / "home", vipune.timeout, hf_home=vipune.hf_home, shown=path),
        vipune,
        tmp / "probes.db",
        enforce=mode == "enforce",
    )
    recipe = str(model)
    probes = {
        "rrf": probe("preflight-rrf", 8, {2: MATCH}),
        "and": probe("preflight-and", 6, {1: "a zebra at the zoo", 3: "a violin in the hall"}),
        "pool-a": probe("preflight-pool-a", 61, {29: MATCH}),
        "pool-b": probe(
            "preflight-pool-b",
            61,
            {59: MATCH},
            created_at=[NEW] + [OLD] * 60,
            keys=["000" if i == 59 else f"{i + 1:03d}" for i in range(61)],
        ),
        "ties": probe(
            "preflight-ties", 4, created_at=[OLD, NEW, NEW, OLD], keys=["a", "c", "b", "d"], thetas=[0.1, 0.1, 0.1, 1.5]
        ),
    }
    try:
        check_commands(pre, expected["version"])
        # Parity first: the fusion probes' known ranks assume vipune's query vector is ours.
        check_parity(pre, embed, tmp / "parity.db", tmp / "export.jsonl", recipe)
        personas = probe_personas(list(probes.values()), embed([QUERY])[0])
        # Before the fusion checks, which assume vipune's query vector is the harness's.
        check_query_parity(pre, embed, tmp / "query.db", tmp / "query.jsonl")
        check_import(pre, personas, tmp / "probes.jsonl")
        check_fusion(pre, probes["rrf"], probes["and"], probes["pool-a"], probes["pool-b"], probes["ties"])
        check_refusals(pre, "preflight-rrf")
        binary.check_wrapped()  # before its findings are kept under this build's fingerprint
    except CheckFailed as exc:
        raise EvalError(
            f"preflight of {path} (vipune {expected['version']}): {exc.message}; this binary "
            "does not do what the harness's mirrors and metrics assume, so nothing was "
            "searched with it",
            fix=exc.fix
            or "a build whose search was changed on purpose: set vipune.preflight: "
            "record to evaluate it anyway, its failed checks listed",
        ) from exc
    except VipuneError as exc:
        raise EvalError(f"preflight of {path} (vipune {expected['version']}): {exc.message}", fix=exc.fix) from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    parity = next(c for c in pre.findings if c["check"] == "embedding_parity")
    query_parity = next(c for c in pre.findings if c["check"] == "query_embedding_parity")
    failed = [c["check"] for c in pre.findings if not c["passed"]]
    findings: PreflightResult = {
        "binary": expected,
        "mode": mode,
        "checks": pre.findings,
        "embedding_parity": parity,
        "query_embedding_parity": query_parity,
        "follows_contract": not failed,
        "failed_checks": failed,
        # each failure in words: the drift it is, when known, else the check's name
        "drift": list(dict.fromkeys(c.get("drift") or c["check"] for c in pre.findings if not c["passed"])),
    }
    write_json(out, findings)
    log.info(
        "preflight of vipune %s: %d checks, failed: %s",
        expected["version"],
        len(pre.findings),
        ", ".join(failed) or "none",
    )
    return findings
