"""Parse-time set-up without Snakemake: the runs and the rules that search them."""

from support.scenarios import REPO


def test_every_kind_of_retriever_has_a_search_rule_that_runs_its_command():
    """One vocabulary for kinds of run (issue 28): the table says which rule searches each kind,
    and that rule's shell line runs the table's command, a command of the CLI."""
    import re

    from vipune_eval.cli import COMMANDS
    from vipune_eval.plan.workspace import SEARCHES
    from vipune_eval.registry.retrievers import Kind

    rules = (REPO / "workflow" / "rules" / "search.smk").read_text()
    assert set(SEARCHES) == set(Kind)
    for kind, search in SEARCHES.items():
        block = re.search(rf"^rule {search.rule}:\n(.*?)(?=^rule |\Z)", rules, re.M | re.S)
        assert block, f"no rule {search.rule} for {kind}"
        assert f'"vipune-eval {search.command} ' in block.group(1), search
        assert search.command in COMMANDS


def test_rule_alls_search_files_are_every_shard_the_reports_scores_read(tmp_path, monkeypatch):
    """Issue 44 item 4: the shards of every scored run (the report's metrics, in every view, a
    compared build's and the what-if grid's included), their status shards and the arms they
    are fused from; Snakemake remakes a missing one only as a target."""
    from support.config import SCHEMA, local_config
    from support.fakes import fake_build
    from vipune_eval.core import paths
    from vipune_eval.plan import manifest, workspace

    binary = fake_build(tmp_path / "build")[0]
    other = fake_build(tmp_path / "other", lane=False, preamble="# another build\n")[0]
    monkeypatch.chdir(tmp_path)
    cfg = local_config(tmp_path, binary=str(binary), compare=[str(other)])
    cfg.update(granularities=["session", "turn"], whatif={"base": "hybrid", "grid": {"k": [10, 60]}})
    ws = workspace.prepare(cfg, SCHEMA)
    files = set(ws.search_files())
    m = manifest.report_manifest(ws)
    metrics = {m["whatif"]["base"]["metrics"], *(v["metrics"] for v in m["whatif"]["variants"])}
    for view in m["views"]:
        metrics |= {*view["metrics"].values(), *view["builds"].values()}
    scored = {paths.fill(paths.METRICS, view=view.folder, run=run.name) for view, run in ws.scored()}
    assert scored == metrics
    for view, run in ws.scored():
        assert set(ws.run_shards(view, run)) <= files and set(ws.status_shards(view, run)) <= files
    lib, compared = ws.run_of("vipune-lib"), paths.vipune_run(ws.builds.compared[0])
    for view in ("", "turn/"):
        assert {
            f"results/{view}search/{lib}/shard-{i}-of-8.{kind}" for i in range(8) for kind in ("run", "status.json")
        } <= files
        assert set(ws.arms_shards(ws.view(view))) <= files
    assert f"results/search/{compared}/shard-7-of-8.status.json" in files
    assert f"results/turn/search/{compared}/shard-7-of-8.status.json" not in files  # scored in the primary view only


def test_prepare_writes_nothing_and_hands_the_run_what_to_write(tmp_path, monkeypatch):
    """Issue 53: parsing (a dry run, --lint, --report) wrote the fingerprints, the config and the
    sha256 cache; now prepare computes them and the run writes them (plan.planned_file, rundir.start)."""
    from support.config import SCHEMA, local_config
    from support.fakes import fake_build
    from vipune_eval.core import paths
    from vipune_eval.plan import workspace

    binary = fake_build(tmp_path / "build")[0]
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    ws = workspace.prepare(local_config(tmp_path, binary=str(binary)), SCHEMA)
    assert list(work.iterdir()) == []
    kinds = {path: content["kind"] for path, content in ws.files.items()}
    assert kinds == {
        paths.DATASET_FINGERPRINT: "dataset",
        paths.MODEL_FINGERPRINT: "model",
        paths.binary_fingerprint_file(ws.builds.primary): "vipune",
        paths.lane_fingerprint_file(ws.builds.lane): "vipune-lane",
    }
    assert ws.record == {paths.CONFIG_JSON: ws.config, paths.BUILD_SOURCES: ws.builds.sources}
    assert ws.sha256_cache.learned  # the dataset and the model, hashed once: the run saves them
