"""The whole DAG through the Snakemake CLI on generated data, a tiny model and the fake vipune."""

import json
import math
import re
import shutil
import subprocess

import pyarrow.parquet as pq
import pytest

from support.results import independent_metrics, read_qrels, read_run
from support.scenarios import RETRIEVERS, clone, make_workdir, snakemake


@pytest.fixture(scope="module")
def full_run(finished_run):
    return finished_run("full")


@pytest.mark.slow
def test_report_has_the_promised_shape_and_provenance(full_run):
    workdir, proc = full_run
    report = json.loads((workdir / "results/report.json").read_text())
    assert report["pairs"] == 16
    assert set(report["retrievers"]) == RETRIEVERS
    for entry in report["retrievers"].values():
        assert set(entry["metrics"]) >= {
            "recall@1",
            "recall@5",
            "recall@10",
            "recall_any@5",
            "recall_all@5",
            "ndcg@10",
            "mrr",
        }
        for category in entry["per_category"].values():
            assert "pairs" in category and "recall@5" in category
    prov = report["provenance"]
    assert len(prov["dataset"]["sha256"]) == 64
    assert prov["model"]["pooling"] == "mean" and len(prov["model"]["files"]["onnx/model.onnx"]) == 64
    assert prov["vipune"]["version"] and len(prov["vipune"]["sha256"]) == 64
    assert prov["package"]["name"] == "vipune-eval" and prov["config"]["search_limit"] == 10
    checks = {c["check"] for c in prov["preflight"]["checks"]}
    assert {
        "rrf_k25_ranks_from_1",
        "bm25_is_and_of_every_word",
        "candidate_pool_10x_limit",
        "semantic_ties_newer_then_import_order",
        "embedding_parity",
    } <= checks
    assert set(report["views"]) == {"session", "turn", "chunk", "official", "official-turn"}
    for view in report["views"].values():
        assert set(view["retrievers"]) == RETRIEVERS and view["description"]
    # The run ends with a summary a person reads (issue 31), not the JSON; Markdown tables too.
    summary = (workdir / "results/summary.txt").read_text()
    assert proc.stdout.rstrip().endswith(summary.rstrip()) and '"provenance"' not in proc.stdout
    assert len(summary.splitlines()) <= 35
    assert "| vipune |" in (workdir / "results/report.md").read_text()
    # Every unique text of every view was embedded once, by some job, and timed there (issue 23).
    unique = {
        row["text_id"]
        for path in (workdir / "results").glob("**/filter/texts.parquet")
        for row in pq.read_table(path).to_pylist()
        if row["text"]
    }  # an empty text is not embedded
    embed = report["embed"]
    assert embed["texts"] == len(unique) and embed["jobs"] >= 2
    (cpu,) = embed["providers"]  # issue 33: per provider, with the device and what the bytes guarantee
    assert cpu["provider"] == "cpu" and cpu["device"] and "any batch size" in cpu["reproducibility"]
    assert embed["seconds"] > 0 and cpu["projection"] is None and "config.json" in cpu["why"]
    assert embed["job_seconds"] > embed["seconds"] + embed["load_seconds"] > embed["seconds"]
    assert "## Embed throughput" in (workdir / "results/report.md").read_text()
    assert f"**CPU** ({cpu['device']})" in (workdir / "results/report.md").read_text()


@pytest.mark.slow
def test_every_number_can_be_recomputed_from_the_run_and_qrels_files(full_run):
    workdir, _ = full_run
    report = json.loads((workdir / "results/report.json").read_text())
    gold = read_qrels(workdir / report["qrels"])
    assert len(gold) == report["pairs"]
    pairs_per_category = report["dataset"]["per_category"]
    for name, entry in report["retrievers"].items():
        ranked = read_run(workdir / entry["run"])
        assert all(len(docs) <= 10 for docs in ranked.values())
        rows = independent_metrics(gold, ranked)
        for key, value in entry["metrics"].items():
            expected = sum(r[key] for r in rows.values()) / len(rows)
            assert value == pytest.approx(expected, abs=1e-9), (name, key)
        assert {c: e["pairs"] for c, e in entry["per_category"].items()} == pairs_per_category


@pytest.mark.slow
def test_every_granularity_is_a_full_recomputable_set_of_session_scores(full_run):
    """Issue 12: session, turn and chunk rows, each scored per session from its run and qrels."""
    workdir, _ = full_run
    report = json.loads((workdir / "results/report.json").read_text())
    grains = report["granularities"]
    assert set(grains) == {"session", "turn", "chunk"}
    assert grains["turn"]["rows"] > grains["chunk"]["rows"] >= grains["session"]["rows"]
    for g, block in grains.items():
        folder = "" if g == "session" else f"{g}/"
        gold = read_qrels(workdir / f"results/{folder}filter/qrels.txt")
        for name, entry in block["retrievers"].items():
            assert entry["run"].startswith(f"results/{folder}runs/")
            ranked = read_run(workdir / entry["run"])
            assert all(len(docs) == len(set(docs)) <= 10 for docs in ranked.values())  # sessions, once each
            rows = independent_metrics(gold, ranked)
            for key, value in entry["metrics"].items():
                assert value == pytest.approx(sum(r[key] for r in rows.values()) / len(rows), abs=1e-9), (g, name, key)
        if g != "session":
            assert set(block["vs_session"]) == RETRIEVERS


def longmemeval_metrics(gold, ranked, ks, turns=False):
    """LongMemEval's eval_utils.py written out again, sharing no code with the package."""
    rows = {}
    for qid, relevant in gold.items():
        docs = ranked.get(qid, [])
        row = {}
        for k in ks:
            if turns:  # evaluate_retrieval_turn2session
                strip = ["_".join(d.split("_")[:-1]) for d in docs]
                target = {"_".join(d.split("_")[:-1]) for d in relevant}
                eff = k
                while eff <= len(strip) and len(set(strip[:eff])) < k:
                    eff += 1
                top, n_rel = strip[:eff], len(relevant)
            else:
                top, target, eff, n_rel = docs[:k], relevant, k, len(relevant)
            rels = [1 if d in target else 0 for d in top]
            dcg = sum(r if i == 0 else r / math.log2(i + 1) for i, r in enumerate(rels))
            ideal = sum(1 if i == 0 else 1 / math.log2(i + 1) for i in range(min(n_rel, eff)))
            row[f"recall_any@{k}"] = float(any(t in top for t in target))
            row[f"recall_all@{k}"] = float(all(t in top for t in target))
            row[f"ndcg_any@{k}"] = dcg / ideal if ideal else 0.0
        rows[qid] = row
    return rows


@pytest.mark.slow
def test_official_views_are_longmemevals_protocol_recomputed_independently(full_run):
    workdir, _ = full_run
    report = json.loads((workdir / "results/report.json").read_text())
    official = report["official"]
    assert official["pairs"] + official["skipped_without_user_side_evidence"] == report["pairs"]
    assert official["skipped_without_user_side_evidence"] > 0  # assistant-side evidence only
    assert official["ks"] == [1, 3, 5, 10, 30, 50] and "run_retrieval.py" in official["skip_rule"]
    assert "ndcg_any" in official["measures"] and "ndcg" in official["measures"]
    assert official["published"]["retrievers"]
    for name, turns in (("official", False), ("official-turn", True)):
        view = report["views"][name]
        gold = read_qrels(workdir / view["qrels"])
        assert len(gold) == view["pairs"] == official["pairs"]
        for retriever, entry in view["retrievers"].items():
            assert entry["run"].startswith(f"results/{name}/runs/")
            ranked = read_run(workdir / entry["run"])
            if turns:  # a turn-level run: LongMemEval's turn ids
                assert all(re.fullmatch(r".+_\d+", d) for docs in ranked.values() for d in docs)
            rows = longmemeval_metrics(gold, ranked, official["ks"], turns)
            for key in rows[next(iter(rows))]:
                expected = sum(r[key] for r in rows.values()) / len(rows)
                assert entry["metrics"][key] == pytest.approx(expected, abs=1e-9), (name, retriever, key)
    md = (workdir / "results/report.md").read_text()
    assert "Published figures on other retrievers (not ours" in md and "ndcg_any@5" in md


@pytest.mark.slow
def test_vipune_agrees_with_its_reference_mirrors_in_every_view(full_run):
    """The fake binary and the fake lane follow vipune's algorithm, so `hybrid` must match `vipune`
    and `vipune-lib` exactly and `dense` must match `vipune-semantic` and `vipune-lib-semantic`, at
    every granularity and protocol; the report finds the lanes in agreement on every pair."""
    workdir, _ = full_run
    report = json.loads((workdir / "results/report.json").read_text())
    for view in report["views"].values():
        runs = {name: read_run(workdir / entry["run"]) for name, entry in view["retrievers"].items()}
        assert runs["vipune"] == runs["hybrid"] == runs["vipune-lib"]
        assert runs["vipune-semantic"] == runs["dense"] == runs["vipune-lib-semantic"]
    lanes = {(a["view"], a["run"], a["mirror"]): a for a in report["diagnostics"]["lanes"]}  # issue 44.1: every view
    assert set(lanes) == {
        (view, *pair)
        for view in report["views"]
        for pair in (("vipune-lib", "vipune"), ("vipune-lib-semantic", "vipune-semantic"))
    }
    for (view, _, _), a in lanes.items():
        top = max(report["views"][view]["ks"])
        assert (
            a[f"same_top{top}_share"] == 1.0 and a[f"differ_top{top}"] == [] and a["only_run"] == a["only_mirror"] == []
        )


@pytest.mark.slow
def test_intervals_comparisons_and_diagnostics(full_run):
    workdir, _ = full_run
    report = json.loads((workdir / "results/report.json").read_text())
    for entry in report["retrievers"].values():
        for key, value in entry["metrics"].items():
            low, high = entry["intervals"][key]
            assert low - 1e-9 <= value <= high + 1e-9, key
        for category in entry["per_category"].values():
            assert set(category["intervals"]) == set(entry["metrics"])
    assert set(report["comparisons"]) == {f"vipune vs {r}" for r in RETRIEVERS - {"vipune"}}
    versus_bm25 = report["comparisons"]["vipune vs bm25"]["overall"]["recall_any@10"]
    assert versus_bm25["test"] == "mcnemar-exact" and versus_bm25["difference"] > 0
    diagnostics = report["diagnostics"]
    assert diagnostics["vipune_vs_hybrid"]["same_top10_share"] == 1.0
    assert diagnostics["vipune_semantic_vs_dense"]["same_top10_share"] == 1.0
    assert 0 < diagnostics["bm25_and_query"]["bm25_empty_share"] < 1  # keyword questions match
    ranks = diagnostics["gold_ranks"]["pairs"]
    assert len(ranks) == report["pairs"] and ranks[0]["recall@5"] <= ranks[-1]["recall@5"]
    assert report["retrievers"]["vipune"]["search_seconds"]["calls"] == report["pairs"]
    assert report["provenance"]["preflight"]["embedding_parity"]["min_cosine"] > 0.999


@pytest.mark.slow
def test_plots_and_the_html_report(full_run):
    """Issue 31: the run writes the HTML report at its end, from its own config: only jobs that
    ran (no download, no vipune_binary), no missing metadata, no placeholder plot, and the page
    with report.md's tables in it."""
    workdir, _ = full_run
    names = ["recall_at_k", "recall_per_category", "gold_ranks", "granularities", "latency"]
    assert sorted(p.stem for p in (workdir / "results/plots").glob("*.png")) == sorted(names)  # no whatif
    for name in names:
        assert (workdir / f"results/plots/{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (workdir / "results/report.html").read_text()
    for name in [*(f"{n}.png" for n in names), "report.html"]:
        assert name in html
    assert "download_dataset" not in html and "vipune_binary" not in html and "whatif.png" not in html
    log = (workdir / "results/logs/report_html.log").read_text()
    assert "Missing metadata" not in log and "Report created." in log
    # from the run's own workflow: no second Snakemake start (~2 s), which would read the profile
    assert "Using workflow specific profile" not in log
    page = (workdir / "results/html/report-page.html").read_text()
    assert "<h2>Overall (95% intervals in brackets)</h2>" in page and page.count("data:image/png;base64") == len(names)


CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


@pytest.mark.slow
@pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium on PATH (Debian: apt-get install chromium): the HTML report is not opened in a real browser",
)
def test_the_html_report_opens_on_the_numbers_in_a_browser(full_run, tmp_path):
    """Issue 31: in a real browser, the HTML report's first page holds the headline table with
    report.json's numbers (vipune first) and what was scored. docs/outputs.md shows how to look."""
    from vipune_eval.stages.report.sections.contents import document

    workdir, _ = full_run
    report = json.loads((workdir / "results/report.json").read_text())
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            (workdir / "results/report.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    dom = proc.stdout
    assert 'id="vipune-eval"' in dom, proc.stderr[-2000:]  # the React app put the first page in
    front = dom[dom.index('id="vipune-eval"') :]
    body = re.search(r"<tbody>(.*?)</tbody>", front, re.S).group(1)
    shown = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]
    assert shown == document(report).headline.rows and shown[0][0] == "vipune"
    assert f"{report['pairs']} pairs scored" in front and "What was scored" in front


@pytest.mark.slow
def test_a_second_run_has_nothing_to_do(full_run, workflow_env):
    workdir, _ = full_run
    proc = snakemake(workdir, "-n", "--cores", "1", env=workflow_env)
    assert "Nothing to be done" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_lint_is_clean(full_run, workflow_env):
    workdir, _ = full_run
    proc = snakemake(workdir, "--lint", env=workflow_env, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_missing_vipune_binary_stops_with_instructions(tmp_path, workflow_env, small):
    """On the small scenario: what runs before the missing binary's job fails is no part of it."""
    other = make_workdir(tmp_path / "nobinary", *small, scenario="small", vipune={"binary": "vipune-not-installed"})
    proc = snakemake(other, "--cores", "1", env=workflow_env, check=False)
    assert proc.returncode != 0
    assert "cargo install vipune" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_plots_and_markdown_read_the_primary_view_whatever_the_key_order(full_run, tmp_path):
    """Regression: the plots took the first view of report.json (sorted keys), so a run with
    `official` but no `chunk` plotted LongMemEval's ks against the seed protocol's metrics."""
    from support.report import markdown_of
    from vipune_eval.stages.report.plots import run_plots

    workdir, _ = full_run
    report = json.loads((workdir / "results/report.json").read_text())
    report["views"] = {
        "official": report["views"]["official"],
        **{k: v for k, v in report["views"].items() if k != "official"},
    }
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    run_plots(path, tmp_path / "plots", ["recall_at_k"])
    assert (tmp_path / "plots" / "recall_at_k.png").exists()
    assert "| vipune |" in markdown_of(report)


@pytest.mark.slow
def test_a_run_of_one_target_leaves_the_html_report_of_the_whole_workflow(finished_run, workflow_env, tmp_path):
    """A finished run builds its HTML report from its own DAG; a run of one target has a DAG of
    that target only, so its report is planned again for the whole workflow: every plot stays."""
    source, _ = finished_run("standard")
    workdir = clone(source, tmp_path / "run")
    snakemake(workdir, "--cores", "1", "results/report.json", "--forcerun", "report", env=workflow_env)
    html = (workdir / "results/report.html").read_text()
    assert all(f"{name}.png" in html for name in ("recall_at_k", "recall_per_category", "gold_ranks"))
    assert "Using workflow specific profile" in (workdir / "results/logs/report_html.log").read_text()
