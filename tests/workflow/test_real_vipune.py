"""The real vipune end to end (issue 29): the workflow on generated data with the binary built
from crates.io by .ci/vipune/build.sh, the tiny test model laid out where vipune looks.

One run of the pinned release (shared by the tests of this file) under a HOME of its own that
holds a user's vipune store, config and environment; then the same run with an earlier release
added to ``vipune.compare``. Skipped, saying why, where the builds are not there (``.ci/run``
builds them and makes these tests required).
"""

import base64
import hashlib
import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from support import real_vipune
from support.results import independent_metrics, read_qrels, read_run, report
from support.scenarios import RETRIEVERS, clone, make_workdir, planned, snakemake
from vipune_eval.vipune.client import Vipune, VipuneError
from vipune_eval.vipune.vipune_lane import find_lane, lane_fingerprint

pytestmark = pytest.mark.real_vipune

SHARDS = 2


def snapshot(folder: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``folder``: its mtime and sha256 (folders too, by mtime)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        out[str(path.relative_to(folder))] = (path.stat().st_mtime_ns, digest)
    return out


@pytest.fixture(scope="module")
def user_home(tmp_path_factory):
    """A user's HOME as vipune leaves it: a store with a memory in it, a config that would change
    every ranking (recency, another model, another database)."""
    home = tmp_path_factory.mktemp("user-home")
    (home / ".vipune").mkdir()
    (home / ".vipune" / "memories.db").write_bytes(b"the user's own store: not to be opened\n")
    (home / ".config" / "vipune").mkdir(parents=True)
    (home / ".config" / "vipune" / "config.toml").write_text(
        f'recency_weight = 1.0\nembedding_model = "intfloat/multilingual-e5-small"\n'
        f'database_path = "{home}/.vipune/memories.db"\n'
    )
    return home


@pytest.fixture(scope="module")
def real_env(workflow_env, user_home, tmp_path_factory):
    """The workflow's environment with the user's HOME and VIPUNE_* variables that would change
    the rankings if they leaked (Snakemake's own cache goes elsewhere: it is the launcher's)."""
    return {
        **workflow_env,
        "HOME": str(user_home),
        "XDG_CACHE_HOME": str(tmp_path_factory.mktemp("launcher")),
        "VIPUNE_RECENCY_WEIGHT": "1.0",
        "VIPUNE_HYBRID": "false",
        "VIPUNE_DATABASE_PATH": str(user_home / ".vipune" / "memories.db"),
    }


@pytest.fixture(scope="module")
def real_run(real_vipune_bin, scenario_inputs, real_env, user_home, tmp_path_factory):
    before = snapshot(user_home)
    workdir = make_workdir(
        tmp_path_factory.mktemp("real") / "run",
        *scenario_inputs("real"),
        scenario="real",
        vipune={"binary": str(real_vipune_bin)},
    )
    start = time.perf_counter()
    snakemake(workdir, "--cores", "2", env=real_env)
    print(f"\nreal vipune {real_vipune.RELEASE}: a cold workflow run took {time.perf_counter() - start:.1f} s")
    return workdir, before


@pytest.mark.slow
def test_the_preflight_passes_on_the_real_binary(real_run, real_vipune_bin):
    workdir, _ = real_run
    prov = report(workdir)["provenance"]
    assert prov["vipune"]["version"] == prov["contract_release"] == real_vipune.RELEASE
    assert prov["vipune"]["sha256"] == hashlib.sha256(real_vipune_bin.read_bytes()).hexdigest()
    preflight = prov["preflight"]
    assert preflight["follows_contract"] and preflight["failed_checks"] == []
    assert {c["check"] for c in preflight["checks"]} >= {
        "commands",
        "embedding_parity",
        "import",
        "fts_in_sync",
        "rrf_k25_ranks_from_1",
        "bm25_is_and_of_every_word",
        "candidate_pool_at_least_50",
        "candidate_pool_10x_limit",
        "candidate_pool_10x_limit_and_fused_ties_to_smaller_id",
        "semantic_ties_newer_then_import_order",
        "query_over_512_tokens_exits_3",
        "limit_over_10000_refused",
    }
    assert preflight["embedding_parity"]["min_cosine"] > 0.999
    md = (workdir / "results/report.md").read_text()
    assert f"- vipune {real_vipune.RELEASE} (binary sha256 {prov['vipune']['sha256']}" in md


@pytest.mark.slow
def test_the_real_vipune_ranks_like_its_mirrors(real_run):
    """`vipune` is the binary's hybrid search, `hybrid` the harness's mirror of it on the same
    vectors; `vipune-semantic` and `dense` likewise. The issue asks for >= 99 % of top-10 lists."""
    workdir, _ = real_run
    result = report(workdir)
    runs = {name: read_run(workdir / entry["run"]) for name, entry in result["retrievers"].items()}
    assert set(runs) == RETRIEVERS and len(runs["vipune"]) == result["pairs"] == 24
    shares = {}
    for binary, mirror in (("vipune", "hybrid"), ("vipune-semantic", "dense")):
        same = sum(runs[binary][q][:10] == runs[mirror][q][:10] for q in runs[mirror])
        shares[binary] = same / len(runs[mirror])
        print(f"{binary} = {mirror} on {same} of {len(runs[mirror])} top-10 lists")
    assert shares == {"vipune": 1.0, "vipune-semantic": 1.0}  # aim and result: all (>= 0.99 required)
    diagnostics = result["diagnostics"]
    assert diagnostics["vipune_vs_hybrid"]["same_top10_share"] == shares["vipune"]
    assert diagnostics["vipune_semantic_vs_dense"]["same_top10_share"] == shares["vipune-semantic"]


def lanes_agree(workdir: Path) -> dict[str, float]:
    """The share of pairs whose whole ranked list (10 sessions) is the same in the lib lane as in
    the binary lane, per pair of runs; each pair that differs is printed."""
    result = report(workdir)
    runs = {name: read_run(workdir / entry["run"]) for name, entry in result["retrievers"].items()}
    shares = {}
    for lib, binary in (("vipune-lib", "vipune"), ("vipune-lib-semantic", "vipune-semantic")):
        differ = [q for q in runs[binary] if runs[lib].get(q) != runs[binary][q]]
        for q in differ:
            print(f"{lib} differs from {binary} on {q}: {runs[lib].get(q)} vs {runs[binary][q]}")
        shares[lib] = 1 - len(differ) / len(runs[binary])
    return shares


@pytest.mark.slow
def test_the_lib_lane_ranks_exactly_as_the_binary(real_run):
    """vipune's own search code fed the cached query vectors (vipune-lane, built from the same
    source) ranks as the binary does with its own model, on every pair (issue 37)."""
    workdir, _ = real_run
    assert lanes_agree(workdir) == {"vipune-lib": 1.0, "vipune-lib-semantic": 1.0}
    prov = report(workdir)["provenance"]
    assert prov["lane"]["binary"] == prov["vipune"]["id"] and prov["lane"]["version"] == real_vipune.RELEASE


@pytest.mark.slow
def test_every_number_recomputes_from_the_run_and_qrels_files(real_run):
    workdir, _ = real_run
    result = report(workdir)
    gold = read_qrels(workdir / result["qrels"])
    for name, entry in result["retrievers"].items():
        rows = independent_metrics(gold, read_run(workdir / entry["run"]))
        for key, value in entry["metrics"].items():
            assert value == pytest.approx(sum(r[key] for r in rows.values()) / len(rows), abs=1e-9), (name, key)


@pytest.mark.slow
def test_the_users_home_store_and_config_are_untouched(real_run, user_home):
    """Every call had a private HOME: the user's store, config and environment neither changed
    nor leaked (a leak of the config or the variables would change every ranking above)."""
    _, before = real_run
    assert snapshot(user_home) == before


@pytest.mark.slow
def test_an_earlier_release_compared_reruns_only_its_own_jobs(real_run, older_vipune_bin, real_env, tmp_path):
    """Two real builds in one report: adding the earlier release plans only its preflight, its
    searches and its score; the report's per-question diff is the runs' own difference; and that
    release's lane, built from its source, ranks as its binary on every pair."""
    source, _ = real_run
    workdir = clone(source, tmp_path / "compare")
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    config["vipune"]["compare"] = [str(older_vipune_bin)]
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    assert planned(workdir, real_env) == {
        "preflight": 1,
        "search_vipune": SHARDS,
        "score": 1,
        "report": 1,
        "plots": 1,
        "report_page": 1,
        "all": 1,
        "planned_text": 2,
        "planned_file": 2,
    }  # its fingerprint, the manifest
    snakemake(workdir, "--cores", "2", env=real_env)
    result = report(workdir)
    primary, older = result["builds"]
    assert (primary["version"], older["version"]) == (real_vipune.RELEASE, real_vipune.OLDER)
    assert older["follows_contract"] and older["comparison"]["correction"]
    # The per-question diff, recomputed from the two run files.
    gold = read_qrels(workdir / result["qrels"])
    now = read_run(workdir / older["run"])
    before = read_run(workdir / primary["run"])
    expected = [
        q for q in sorted(gold) if any(gold[q] & set(now[q][:k]) != gold[q] & set(before[q][:k]) for k in (1, 5, 10))
    ]
    assert [c["question_id"] for c in older["changes"]] == expected
    identical = sum(now[q] == before[q] for q in gold)
    print(
        f"vipune {real_vipune.OLDER} vs {real_vipune.RELEASE}: identical rankings on {identical} of "
        f"{len(gold)} pairs; {len(expected)} pairs gained or lost gold sessions"
    )
    md = (workdir / "results/report.md").read_text()
    assert f"{len(expected)} pairs gained or lost gold sessions" in md
    assert planned(workdir, real_env) == {}
    # The earlier release's own lane, on the same shards, ranks as that binary did (issue 37).
    lane = find_lane(older_vipune_bin, real_vipune.OLDER)
    fingerprint = tmp_path / "lane.json"
    fingerprint.write_text(
        json.dumps(
            lane_fingerprint(
                lane, json.loads((workdir / "results/fingerprints" / f"vipune-{older['id']}.json").read_text()), 60
            )
        )
    )
    runs = {}
    for i in range(SHARDS):
        out = {name: tmp_path / f"{name}-{i}.run" for name in ("hybrid", "semantic")}
        subprocess.run(
            [
                "vipune-eval",
                "search-vipune-lib",
                "--rows",
                "results/filter/rows.parquet",
                "--texts",
                "results/filter/texts.parquet",
                "--embeddings",
                "results/embed/shard-0-of-1.parquet",
                "--shard",
                str(i),
                "--shards",
                str(SHARDS),
                "--limit",
                "10",
                "--depth",
                "10",
                f"--binary={older_vipune_bin}",
                "--fingerprint",
                str(workdir / "results/fingerprints" / f"vipune-{older['id']}.json"),
                "--lane",
                str(lane),
                "--lane-fingerprint",
                str(fingerprint),
                "--timeout",
                "60",
                "--on-error",
                "stop",
                "--tmp",
                str(tmp_path / "tmp"),
                "--out",
                str(out["hybrid"]),
                "--semantic-out",
                str(out["semantic"]),
                "--status-out",
                str(tmp_path / f"status-{i}.json"),
                "--arms-out",
                str(tmp_path / f"arms-{i}.parquet"),
                "--kept-stores",
                str(tmp_path / "stores"),
                "--kept-stores-gb",
                "0",
            ],
            cwd=workdir,
            env=real_env,
            check=True,
            capture_output=True,
        )
        for name, path in out.items():
            runs.setdefault(name, {}).update(read_run(path))
    assert runs["hybrid"] == now
    semantic = {}  # a compared build's semantic run is searched, not scored: its shards
    for path in sorted((workdir / "results/search" / f"vipune-{older['id']}-semantic").glob("shard-*.run")):
        semantic.update(read_run(path))
    assert runs["semantic"] == semantic and len(semantic) == len(gold)


def test_an_import_naming_another_model_is_refused(real_vipune_bin, vipune_hf_home, tmp_path):
    vipune = Vipune(real_vipune_bin, tmp_path / "home", 30, hf_home=vipune_hf_home)
    vector = np.zeros(384, "<f4").tobytes()
    rows = [
        {
            "type": "export",
            "format_version": 1,
            "rows": 1,
            "model_id": "intfloat/multilingual-e5-small",
            "model_revision": "614241f622f53c4eeff9890bdc4f31cfecc418b3",
        },
        {
            "id": "a",
            "project_id": "p",
            "content": "text",
            "embedding": base64.b64encode(vector).decode(),
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z",
            "memory_type": "fact",
            "status": "active",
            "retrieval_count": 0,
        },
    ]
    jsonl = tmp_path / "other-model.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(
        VipuneError,
        match=r"import refused: export was produced with model "
        r"intfloat/multilingual-e5-small@614241f6",
    ):
        vipune.import_file(tmp_path / "store.db", jsonl, "test")


def test_a_vipune_that_goes_to_the_hub_fails_at_once_with_a_named_error(real_vipune_bin, tmp_path):
    """No model where vipune looks: its hub client is refused at once (every call is kept off the
    network), not left to hang, and the error says what happened."""
    empty = tmp_path / "empty-hf-home"
    empty.mkdir()
    vipune = Vipune(real_vipune_bin, tmp_path / "home", 30, hf_home=empty)
    start = time.perf_counter()
    with pytest.raises(VipuneError, match="Failed to download embedding model") as info:
        vipune.add(tmp_path / "store.db", "p", "a probe text", "test")
    assert time.perf_counter() - start < 10
    assert "went to the hub" in info.value.fix and str(empty) in info.value.fix
