"""stages/report/gate.py: a finished comparison of two vipune builds judged (issue 52 item 3).

The runs are made as the workflow makes them: the score stage's own function writes each build's
metrics from a ranking of each pair's gold session, report.build the report; the gate reads the
folder they leave. Before → after is the baseline → the checkout."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from xml.etree import ElementTree

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vipune_eval.core.failed_pair import failed_pair
from vipune_eval.core.io import dump_json
from vipune_eval.core.ranking_settings import RankingSettings
from vipune_eval.stages.embed.tally import Tally
from vipune_eval.stages.filter.pairs import PAIRS_SCHEMA
from vipune_eval.stages.report import gate
from vipune_eval.stages.report.report import Loaded, LoadedView, build
from vipune_eval.stages.score import Scoring, run_score

N = 40
KS = [1, 5, 10]
GOLD = {f"q{i:02d}": f"g{i}" for i in range(N)}
CATEGORY = {q: ("multi-session" if i % 2 else "temporal-reasoning") for i, q in enumerate(GOLD)}
CHECKOUT, BASELINE = "0.20.2-aaaaaaaaaaaa", "0.20.2-bbbbbbbbbbbb"
SCORING = Scoring(KS, ["recall", "mrr"], RankingSettings(10, 10))
SETTINGS = {"flags": ["--recency", "0", "--limit", "10", "--no-touch"], "depth": 10, "collapse": True}
DIGESTS = {q: [f"data-{q}".ljust(16, "0"), f"vec-{q}".ljust(16, "0")] for q in GOLD}


def scored(
    folder: Path, name: str, ranks: list[int | None], failed: dict | None = None, searched: dict | None = None
) -> Path:
    """The metrics file of a run ranking each pair's gold session at ``ranks`` (None: not in the
    top 10), as the score stage writes it from the run and its status file."""
    folder.mkdir(parents=True, exist_ok=True)
    pairs = folder / "pairs.parquet"
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "question_id": q,
                    "question_type": CATEGORY[q],
                    "question": "?",
                    "question_date": "",
                    "split": "test",
                    "gold": [g],
                    "gold_source": "answer_session_ids",
                    "session_ids": [g, "x"],
                    "user_side_evidence": True,
                }
                for q, g in GOLD.items()
            ],
            schema=PAIRS_SCHEMA,
        ),
        pairs,
    )
    qrels = folder / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 {g} 1\n" for q, g in GOLD.items()))
    lines = []
    for (q, g), rank in zip(GOLD.items(), ranks):
        if q in (failed or {}):
            continue
        docs = [f"{q}-filler{n}" for n in range(9)]
        if rank is not None:
            docs.insert(rank - 1, g)
        lines += [f"{q} Q0 {d} {r} {100 - r} {name}" for r, d in enumerate(docs[:10], 1)]
    (folder / f"{name}.in.run").write_text("\n".join(lines) + "\n")
    status = folder / f"{name}.status.json"
    shown = {q: d for q, d in DIGESTS.items() if q not in (failed or {})}
    status.write_text(
        json.dumps(
            {
                "failed": failed or {},
                "search_seconds": {},
                "searched": searched or {"settings": SETTINGS, "personas": shown},
            }
        )
    )
    run_score(
        qrels,
        pairs,
        [folder / f"{name}.in.run"],
        SCORING,
        name,
        folder / f"{name}.run",
        folder / f"{name}.json",
        status=[status],
    )
    return folder / f"{name}.json"


def finished_run(
    tmp_path: Path,
    before: list[int | None],
    after: list[int | None],
    on: str = "vipune-lib",
    copies: list[dict] | None = None,
    before_failed: dict | None = None,
    before_searched: dict | None = None,
    builds: int = 2,
    gate_settings: dict | None = None,
) -> Path:
    """The results folder of a finished run comparing the checkout (vipune.binary, ranking as
    ``after``) with the baseline (vipune.compare, ranking as ``before``) on ``on``."""
    results = tmp_path / "results"
    metrics = results / "metrics"
    after_file = scored(metrics / "after", on, after)
    before_file = scored(metrics / "before", on, before, before_failed, before_searched)
    loaded_after, loaded_before = json.loads(after_file.read_text()), json.loads(before_file.read_text())
    entry = {
        "name": "session",
        "folder": "",
        "protocol": "seed",
        "granularity": "session",
        "description": "seed protocol, session rows",
        "ks": KS,
        "measures": ["recall", "mrr"],
        "qrels": "results/filter/qrels.txt",
        "scored_with": asdict(SCORING),
        "metrics": {on: str(Path("results") / after_file.relative_to(results))},
        "builds": {BASELINE: str(Path("results") / before_file.relative_to(results))} if builds > 1 else {},
    }
    summary = {
        "pairs": N,
        "instances": N,
        "abstention": 0,
        "per_category": {c: list(CATEGORY.values()).count(c) for c in set(CATEGORY.values())},
        "split": {"seed": 0, "dev_fraction": 0.0, "dev": 0, "test": N},
    }
    manifest = {
        "views": [entry],
        "retrievers": [on],
        "settings": {},
        "corpus": None,
        "primary": CHECKOUT,
        "builds": [BASELINE] if builds > 1 else [],
        "compared_on": on,
        "baseline": None,
        "whatif": None,
        "mirrors": {},
        "roles": {"bm25_and": None, "hybrid_and": None, "hybrid_or": None},
        "searched_by": {},
        "lanes": {},
    }
    lane = {
        "id": "0.20.2-cccccccccccc",
        "sha256": "cc" * 32,
        "version": "0.20.2",
        "binary": CHECKOUT,
        "built": {"vipune_source": "checkout /src/vipune", "sources": {"compiled": [], "copies": copies or []}},
    }
    loaded = Loaded(
        manifest=manifest,
        views=[LoadedView(entry, summary, {on: loaded_after}, {"rows": N, "unique_texts": N, "tokens_embedded": N})],
        gold={q: {g} for q, g in GOLD.items()},
        rows=[{"question_id": q, "row_sessions": [g], "row_text_ids": [f"t-{q}"]} for q, g in GOLD.items()],
        truncated={f"t-{q}": False for q in GOLD},
        tallies=[
            Tally(
                texts=N,
                tokens=N,
                squares=N,
                seconds=1.0,
                threads=1,
                shape={"layers": 6, "hidden": 384, "intermediate": 1536},
            )
        ],
        builds={BASELINE: loaded_before} if builds > 1 else {},
        lab={},
        fingerprints={b: {"id": b, "version": "0.20.2", "sha256": b[-12:] * 5} for b in (CHECKOUT, BASELINE)},
        preflights={},
        dataset={"kind": "dataset", "sha256": "ab" * 32, "filename": "lme.json"},
        model={
            "kind": "model",
            "repo_id": "m/x",
            "revision": "r" * 40,
            "file": "model.onnx",
            "pooling": "mean",
            "files": {"model.onnx": "cd" * 32},
        },
        config={"model": {"path": "/models/x"}},
        sources={CHECKOUT: "vipune.binary '/src/vipune/target/fast/vipune'", BASELINE: "vipune.compare '0.20.2'"},
        lanes={CHECKOUT: lane} if on == "vipune-lib" else {},
    )
    results.mkdir(parents=True, exist_ok=True)
    (results / "report.json").write_text(dump_json(build(loaded)))
    (results / "report-inputs.json").write_text(json.dumps(manifest))
    (results / "config.json").write_text(json.dumps({"gate": gate_settings or {"margin": 0.01, "alpha": 0.05}}))
    return results


SAME = [1 + i % 3 for i in range(N)]  # gold at rank 1, 2 or 3
HURT = [r if i % 8 == 0 else 11 - r for i, r in enumerate(SAME)]  # 35 of 40 pairs lose their gold from the top 5
FEW = [6 if i in (3, 7) else r for i, r in enumerate(SAME)]  # two pairs move: no significant difference


def junit_cases(xml: Path) -> tuple[ElementTree.Element, list[ElementTree.Element]]:
    """gate.xml parsed, held to the shape JUnit readers take: <testsuites> of <testsuite>s whose
    counts are their test cases', each case named in a class, a failure or error with a message."""
    root = ElementTree.parse(xml).getroot()
    assert root.tag == "testsuites"
    [suite] = root.findall("testsuite")
    cases = suite.findall("testcase")
    for element in (root, suite):
        assert int(element.get("tests")) == len(cases)
        assert int(element.get("failures")) == sum(c.find("failure") is not None for c in cases)
        assert int(element.get("errors")) == sum(c.find("error") is not None for c in cases)
        assert element.get("skipped") == "0" and element.get("time") is not None
    for case in cases:
        assert case.get("name") and case.get("classname") and case.get("time") is not None
        for outcome in [*case.findall("failure"), *case.findall("error")]:
            assert outcome.get("message") and outcome.get("type")
    return suite, cases


def test_an_edit_that_hurts_fails_naming_each_worse_measure_and_the_pairs_that_lost_most(tmp_path, capsys):
    results = finished_run(tmp_path, SAME, HURT)
    assert gate.run_gate(results) == gate.FAIL
    md = (results / "gate.md").read_text()
    assert md.startswith("## ❌ vipune-eval gate: fail (exit 1)\n\n**")
    # the overall recall@5: 1.000 before, 5 of 40 after, every pair that moved lost
    assert "- worse: recall@5 (all pairs, 40 pairs): 1.000 → 0.125 (-87.5 points, 95% CI " in md
    # the pairs that lost most: those whose gold fell from rank 1 out of the top 5 (q00 kept its rank)
    assert (
        "- the pairs that lost most: q03 (multi-session): recall@1 1.00 → 0.00, recall@5 1.00 → 0.00; q06 "
        "(temporal-reasoning): "
    ) in md
    assert md.index("- worse:") < md.index("| measure |") < md.index("### The pairs that moved (35)")
    assert "| recall@5 (multi-session) | 20 | 1.000 | " in md
    assert f"checkout {CHECKOUT} (vipune.binary '/src/vipune/target/fast/vipune') against baseline {BASELINE}" in md
    assert (
        "- [q01](html/report-page.html#explain-q01) (multi-session): recall@5 1.00 → 0.00 · `vipune-eval explain q01`"
        in md
    )
    suite, cases = junit_cases(results / "gate.xml")
    assert len(cases) == 3 * 3  # recall@1/5/10 × (all pairs, two categories)
    failures = [c for c in cases if c.find("failure") is not None]
    assert failures and {c.get("name") for c in failures} >= {"recall@5 (all pairs, 40 pairs)"}
    assert suite.get("name") == f"vipune-eval gate: vipune-lib, {BASELINE} → {CHECKOUT}"
    out = capsys.readouterr().out
    assert out.startswith("vipune-eval gate: fail (exit 1): ") and "gate.md   the pull-request comment" in out


def test_a_neutral_edit_passes_and_says_no_pair_moved(tmp_path):
    results = finished_run(tmp_path, SAME, SAME)
    assert gate.run_gate(results) == gate.PASS
    md = (results / "gate.md").read_text()
    assert md.startswith(
        "## ✅ vipune-eval gate: pass (exit 0)\n\n**No measure worse than the baseline; no pair moved.**"
    )
    assert "No pair moved" in md and "explain" not in md
    _, cases = junit_cases(results / "gate.xml")
    assert len(cases) == 9 and not any(c.find("failure") is not None for c in cases)


def test_moved_pairs_without_a_significant_loss_pass_and_are_each_linked_to_their_explanation(tmp_path):
    results = finished_run(tmp_path, SAME, FEW)
    assert gate.run_gate(results) == gate.PASS
    md = (results / "gate.md").read_text()
    assert "**No measure worse than the baseline beyond the margin; 2 pairs moved.**" in md
    assert (
        "- [q03](html/report-page.html#explain-q03) (multi-session): recall@1 1.00 → 0.00, recall@5 1.00 → 0.00 · "
        "`vipune-eval explain q03`"
    ) in md
    assert "- [q07](html/report-page.html#explain-q07) (multi-session): recall@5 1.00 → 0.00 · " in md  # rank 2 → 6


def test_the_margin_lets_a_loss_within_it_pass(tmp_path):
    assert gate.run_gate(finished_run(tmp_path, SAME, HURT, gate_settings={"margin": 1.0, "alpha": 0.05})) == gate.PASS


def test_the_html_report_holds_the_explanations_it_links():
    from vipune_eval.core import paths

    assert gate.explanation_link("q1") == "html/report-page.html#explain-q1"
    assert Path(paths.GATE_MD).parent / "html/report-page.html" == Path(paths.REPORT_PAGE)


STALE_COPY = {
    "file": "src/commands/mod.rs",
    "item": "fn execute",
    "what": "the dispatch",
    "copied_to": "x",
    "pinned": ["1" * 64],
    "source": "2" * 64,
    "same": False,
}


@pytest.mark.parametrize(
    "case, said",
    [
        ("no comparison", "no comparison: the run evaluates no build but vipune.binary"),
        (
            "failed pairs",
            f'the baseline {BASELINE} failed 2 pairs on vipune-lib (vipune exited 3 saying "too long": q02, q05)',
        ),
        (
            "other data",
            f"a stale baseline: {BASELINE} was searched with other data (the question, the haystack's "
            "sessions or their times: another dataset) on 3 of 40 pairs (q00, q01, q02) than the checkout",
        ),
        (
            "other vectors",
            f"a stale baseline: {BASELINE} was searched with other vectors (another model or embedding) "
            "on 1 of 40 pairs (q09)",
        ),
        ("other settings", f"a stale baseline: {BASELINE} was searched with other settings"),
        ("unrecorded", "the baseline's metrics record nothing of what its search was made from"),
        (
            "stale copy",
            "the builds are compared on vipune-lib, which does not run this checkout's `fn execute` from "
            "src/commands/mod.rs (a stale copy",
        ),
    ],
)
def test_a_run_that_cannot_be_judged_exits_2_naming_why(tmp_path, case, said):
    searched = {"settings": SETTINGS, "personas": dict(DIGESTS)}
    kwargs: dict = {}
    if case == "no comparison":
        kwargs["builds"] = 1
    elif case == "failed pairs":
        why = failed_pair("persona q…: vipune exited 3", 3, "too long")
        kwargs["before_failed"] = {"q02": why, "q05": why}
    elif case == "other data":
        for q in ("q00", "q01", "q02"):
            searched["personas"][q] = ["another dataset0", DIGESTS[q][1]]
        kwargs["before_searched"] = searched
    elif case == "other vectors":
        searched["personas"]["q09"] = [DIGESTS["q09"][0], "another model000"]
        kwargs["before_searched"] = searched
    elif case == "other settings":
        kwargs["before_searched"] = {**searched, "settings": {**SETTINGS, "flags": ["--limit", "50"]}}
    elif case == "unrecorded":
        kwargs["before_searched"] = {}
    elif case == "stale copy":
        kwargs["copies"] = [STALE_COPY]
    results = finished_run(tmp_path, SAME, SAME, **kwargs)
    if case == "unrecorded":  # a metrics file scored before the searches said what they were made from
        path = results / "metrics/before/vipune-lib.json"
        path.write_text(json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != "searched"}))
    assert gate.run_gate(results) == gate.CANNOT
    md = (results / "gate.md").read_text()
    assert md.startswith("## ⚠️ vipune-eval gate: cannot judge (exit 2)\n\n**Cannot judge this run.**\n\n- ")
    assert said in md, md
    _, [case_] = junit_cases(results / "gate.xml")
    assert said.split(" (")[0] in case_.find("error").get("message")


def test_the_pair_sets_must_be_the_same(tmp_path):
    results = finished_run(tmp_path, SAME, SAME)
    path = results / "metrics/before/vipune-lib.json"
    before = json.loads(path.read_text())
    del before["per_query"]["q39"]
    path.write_text(json.dumps(before))
    assert gate.run_gate(results) == gate.CANNOT
    assert "the two builds scored different pairs (1 only in the checkout: q39)" in (results / "gate.md").read_text()


def test_a_folder_without_a_finished_run_cannot_be_judged(tmp_path, capsys):
    assert gate.run_gate(tmp_path) == gate.CANNOT
    assert f"{tmp_path / 'report.json'} is not there (the report): not a finished run" in capsys.readouterr().out
    assert (tmp_path / "gate.md").is_file() and (tmp_path / "gate.xml").is_file()


def test_a_stale_copy_does_not_stop_a_gate_on_the_binary(tmp_path):
    """Compared on the binary, vipune-lib's stale copy is context, not a reason to refuse."""
    results = finished_run(tmp_path, SAME, SAME, on="vipune")
    assert gate.run_gate(results) == gate.PASS


def test_a_pair_that_found_as_many_gold_sessions_but_other_ones_says_so():
    change = {"question_id": "q1", "question_type": "multi-session", "recall@5": [0.5, 0.5], "recall@10": [0.5, 1.0]}
    assert gate.moved_words(change, ["recall@1", "recall@5", "recall@10"]) == (
        "q1 (multi-session): recall@5 0.50 → 0.50 (other gold sessions), recall@10 0.50 → 1.00"
    )
