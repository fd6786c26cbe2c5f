"""The maintainer's loop (issue 14): many builds in one report, and a held-out dev/test split."""

import re
import shutil
from collections import Counter

import pyarrow.parquet as pq
import pytest
import yaml

from support.fakes import fake_build
from support.results import report
from support.scenarios import REPO, make_workdir, planned, snakemake

pytestmark = pytest.mark.slow

SHARDS = 2


def build(folder, name, env=""):
    """A vipune build: the fake and its vipune-lane in ``folder/name/bin`` (``env``: what its search does
    differently)."""
    return fake_build(folder / name, preamble=f"# build {name}\n{env}")[0]


@pytest.fixture(scope="module")
def builds_run(tmp_path_factory, workflow_env, scenario_inputs):
    root = tmp_path_factory.mktemp("builds")
    data, model = scenario_inputs("builds")
    primary = build(root, "primary")
    same = build(root, "same")  # other bytes, the same search
    changed = build(root, "changed", "FAKE_VIPUNE_FAULT=bm25-or export FAKE_VIPUNE_FAULT\n")  # an OR query
    workdir = make_workdir(
        root / "run",
        data,
        model,
        scenario="builds",
        vipune={"binary": str(primary), "compare": [str(same), str(changed)]},
    )
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    assert config["search"]["shards"] == SHARDS
    snakemake(workdir, "--cores", "2", env=workflow_env)
    return root, workdir, config, data, model


def test_every_build_is_a_row_with_paired_results_against_the_primary(builds_run):
    root, workdir, config, _, _ = builds_run
    result = report(workdir)
    builds = result["builds"]
    assert len(builds) == 3 and builds[0]["id"] == result["provenance"]["vipune"]["id"]
    assert {b["id"] for b in builds} == set(result["provenance"]["builds"])
    for b in builds:
        assert set(b) >= {"id", "version", "sha256", "run", "metrics", "intervals", "search_seconds"}
    same, changed = builds[1], builds[2]
    assert "comparison" not in builds[0]
    # The identical build: no significant difference and not one discordant pair.
    comparison = same["comparison"]
    entries = [*comparison["overall"].values(), *(r for c in comparison["per_category"].values() for r in c.values())]
    assert all(r["a_better"] == r["b_better"] == 0 and not r["significant"] for r in entries)
    assert same["changes"] == [] and same["metrics"] == builds[0]["metrics"]
    assert same["follows_contract"] and not changed["follows_contract"]
    assert "bm25_is_and_of_every_word" in changed["failed_checks"]
    # The changed build ranks differently; Holm runs over every comparison of both builds.
    discordant = sum(r["a_better"] + r["b_better"] for r in changed["comparison"]["overall"].values())
    assert discordant > 0 and changed["changes"]
    n = len(comparison["overall"]) * (1 + len(comparison["per_category"]))
    assert comparison["correction"] == changed["comparison"]["correction"] == f"holm over {2 * n} comparisons of 2 runs"
    md = (workdir / "results/report.md").read_text()
    assert md.index("## vipune builds") < md.index("## Overall")
    assert "fails preflight: bm25_is_and_of_every_word" in md
    assert (workdir / "results/plots/latency.png").read_bytes()[:4] == b"\x89PNG"


def test_adding_a_build_runs_only_its_searches_and_dropping_one_only_the_report(builds_run, workflow_env):
    root, workdir, config, _, _ = builds_run
    fourth = build(root, "fourth")
    more = {**config, "vipune": {**config["vipune"], "compare": [*config["vipune"]["compare"], str(fourth)]}}
    (workdir / "config.yaml").write_text(yaml.safe_dump(more))
    # the plan's new files (plan.planned_file): the new build's fingerprint and the report's manifest
    assert planned(workdir, workflow_env) == {
        "preflight": 1,
        "search_vipune": SHARDS,
        "score": 1,
        "planned_text": 2,
        "planned_file": 2,
        "report": 1,
        "plots": 1,
        "report_page": 1,
        "all": 1,
    }
    fewer = {**config, "vipune": {**config["vipune"], "compare": config["vipune"]["compare"][:1]}}
    (workdir / "config.yaml").write_text(yaml.safe_dump(fewer))
    assert planned(workdir, workflow_env) == {
        "planned_text": 1,
        "planned_file": 1,
        "report": 1,
        "plots": 1,
        "report_page": 1,
        "all": 1,
    }
    # A build evaluated here before can be named by its fingerprint id alone.
    changed_id = report(workdir)["builds"][2]["id"]
    by_id = {**config, "vipune": {**config["vipune"], "compare": [config["vipune"]["compare"][0], changed_id]}}
    (workdir / "config.yaml").write_text(yaml.safe_dump(by_id))
    assert planned(workdir, workflow_env) == {}
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))


def test_a_build_named_by_its_id_that_must_be_searched_again_is_refused_by_name(builds_run, workflow_env, tmp_path):
    """A build known by its fingerprint id alone has results here, not a path: when one of its
    shards must be searched again, the job refuses it with a named error and its fix (it once
    raised IsADirectoryError on Path(""), issue 36)."""
    from support.scenarios import clone

    _, source, config, _, _ = builds_run
    changed_id = report(source)["builds"][2]["id"]
    # its results dropped (and the report, which Snakemake would otherwise keep), so that its
    # shards are searched again
    workdir = clone(
        source,
        tmp_path / "by-id",
        drop=(
            f"results/search/vipune-{changed_id}/shard-0-*",
            f"results/runs/vipune-{changed_id}.run",
            f"results/metrics/vipune-{changed_id}.json",
            "results/report.json",
        ),
    )
    by_id = {**config, "vipune": {**config["vipune"], "compare": [config["vipune"]["compare"][0], changed_id]}}
    (workdir / "config.yaml").write_text(yaml.safe_dump(by_id))
    proc = snakemake(workdir, "--cores", "1", env=workflow_env, check=False)
    assert proc.returncode != 0
    log = (workdir / f"results/logs/search_vipune/vipune-{changed_id}/shard-0-of-{SHARDS}.log").read_text()
    named = "no vipune binary is configured for this build, known here by its fingerprint id alone"
    assert named in log and "Traceback" not in log, log
    summary = proc.stderr[proc.stderr.index("job(s) failed or cannot run") :]
    assert named in summary and "fix: set vipune.binary to the build's path, or list its path" in summary


def test_the_split_is_the_same_in_two_places_and_stratified(builds_run, workflow_env, tmp_path):
    _, workdir, config, data, model = builds_run
    other = tmp_path / "elsewhere"
    other.mkdir()
    copy = shutil.copy(data, tmp_path / "data.json")
    (other / "config.yaml").write_text(
        yaml.safe_dump(
            {
                **{k: v for k, v in config.items() if k != "vipune"},
                "dataset": {"path": str(copy), "expected": None},
                "retrievers": ["dense"],
            }
        )
    )
    snakemake(other, "--cores", "2", "results/filter/pairs.parquet", env=workflow_env)  # the split's stage only
    here = pq.read_table(workdir / "results/filter/pairs.parquet", columns=["question_id", "split"]).to_pylist()
    there = pq.read_table(other / "results/filter/pairs.parquet", columns=["question_id", "split"]).to_pylist()
    assert here == there and {p["split"] for p in here} == {"dev", "test"}
    pairs = pq.read_table(workdir / "results/filter/pairs.parquet", columns=["question_type", "split"]).to_pylist()
    size = Counter(p["question_type"] for p in pairs)
    dev = Counter(p["question_type"] for p in pairs if p["split"] == "dev")
    assert all(abs(dev[c] - 0.2 * n) <= 1 for c, n in size.items())
    result = report(workdir)
    assert result["splits"]["dev"]["pairs"] + result["splits"]["test"]["pairs"] == result["pairs"]
    assert set(result["splits"]["test"]["retrievers"]) == set(result["retrievers"])
    assert result["provenance"]["split"]["seed"] == 0 and result["provenance"]["split"]["dev_fraction"] == 0.2
    assert re.search(r"tune on dev \(\d+ pairs\), report test", (workdir / "results/report.md").read_text())


def test_the_maintainers_loop_as_documented_reruns_only_the_new_builds_jobs(finished_run, workflow_env, tmp_path):
    """docs/reruns.md's loop, typed as it stands there, on a finished run (vipune.preflight:
    enforce, the default): the mode is no parameter of the searches, so turning `record` on plans
    only the new build's preflight, searches and score (issue 31, 5); a build whose only change is
    RRF k = 60 is reported as fusion drift, not as AND-query or pool failures (issue 31, 6); and
    back under enforce, that recorded build is refused before any job."""
    from support.scenarios import clone

    source, _ = finished_run("standard")
    workdir = clone(source, tmp_path / "loop")
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    shards = config["search"]["shards"]
    primary = report(workdir)["provenance"]["vipune"]["id"]
    k60 = build(tmp_path, "k60", "FAKE_VIPUNE_FAULT=rrf-k60 export FAKE_VIPUNE_FAULT\n")
    loop = (REPO / "docs/reruns.md").read_text()
    assert "preflight: record}'" in loop and "--config vipune='{binary: " in loop
    binary = shutil.which("vipune", path=workflow_env["PATH"])

    def with_vipune(value):
        return ["--config", f"vipune={value}"]

    the_loop = with_vipune(f"{{binary: {binary}, compare: [{primary}, {k60}], preflight: record}}")
    assert planned(workdir, workflow_env, *the_loop) == {
        "preflight": 1,
        "search_vipune": shards,
        "score": 1,
        "planned_text": 2,
        "planned_file": 2,  # k60's, the manifest
        "report": 1,
        "plots": 1,
        "report_page": 1,
        "all": 1,
    }
    assert planned(workdir, workflow_env, *with_vipune("{preflight: record}")) == {}
    snakemake(workdir, "--cores", "2", *the_loop, env=workflow_env)
    result = report(workdir)
    drifted = result["builds"][1]
    assert drifted["failed_checks"] == ["rrf_k25_ranks_from_1"]
    assert drifted["drift"] == [
        "RRF k differs: same order, other scores (vipune's fused scores fit k = 60; "
        "the contract and the hybrid mirrors use k = 25)"
    ]
    md = (workdir / "results/report.md").read_text()
    assert "fails preflight: RRF k differs: same order, other scores" in md
    assert "bm25_is_and_of_every_word" not in md and "candidate_pool" not in md
    assert planned(workdir, workflow_env, *the_loop) == {}
    refused = snakemake(
        workdir, "-n", *with_vipune(f"{{compare: [{k60}], preflight: enforce}}"), env=workflow_env, check=False
    )
    assert refused.returncode != 0
    assert re.search(
        r"vipune.preflight is enforce, and the preflight of \S+ \(RRF k differs: same order",
        refused.stdout + refused.stderr,
    )
