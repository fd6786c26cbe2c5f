"""The report's manifest: the roles of the configured runs, found by setting (plan.manifest)."""

from vipune_eval.plan import manifest
from vipune_eval.registry import retrievers as registry


def test_vipune_presets_name_the_reference_run_they_mirror():
    specs = registry.resolve(["vipune", "vipune-semantic", {"name": "h", "use": "hybrid"}, "dense"])
    assert manifest.mirror_of(specs[0], specs) == "h"
    assert manifest.mirror_of(specs[1], specs) == "dense"
    assert manifest.mirror_of(specs[0], specs[:2]) is None


def test_the_report_roles_are_found_by_setting_not_by_name():
    specs = registry.resolve(
        [
            {"name": "b", "use": "bm25"},
            {"name": "h", "use": "hybrid", "k": 25},
            "hybrid-or",
            {"name": "h60", "use": "hybrid", "k": 60},
        ]
    )
    assert manifest.roles(specs) == {"bm25_and": "b", "hybrid_and": "h", "hybrid_or": "hybrid-or"}
    assert manifest.roles(registry.resolve(["dense"])) == dict.fromkeys(manifest.ROLES)


def test_each_views_settings_are_what_its_score_jobs_are_given_and_record(tmp_path, monkeypatch):
    """Issue 51 item 4: the settings the report checks each run against are the score stage's own
    (stages.score.Scoring: what the metrics record), valued as the rules give them: each view's ks,
    measures and what its searches rank to (View.ranking_settings); every scored run names the rules that search it."""
    import dataclasses

    from support.config import SCHEMA, local_config
    from support.fakes import fake_build
    from vipune_eval import cli
    from vipune_eval.plan import workspace
    from vipune_eval.stages.score import Scoring

    monkeypatch.chdir(tmp_path)
    cfg = local_config(tmp_path, binary=str(fake_build(tmp_path / "build")[0]))
    cfg.update(granularities=["session", "turn"], protocol="official", search_limit=20, ks=[1, 5, 20])
    ws = workspace.prepare(cfg, SCHEMA)
    m = manifest.report_manifest(ws)
    for view, entry in zip(ws.views, m["views"]):
        options = [
            "--ks",
            *map(str, view.ks(cfg)),
            "--measures",
            *view.measure_names(),
            *view.ranking_settings(cfg).options(),
            *(["--turn-to-session"] if view.turn_level_run else []),
        ]  # as common.smk's score_options
        _, _, kwargs = cli.stage_call(
            [
                "score",
                "--qrels",
                "q",
                "--pairs",
                "p",
                "--runs",
                "r",
                "--name",
                "n",
                "--run-out",
                "o",
                "--metrics-out",
                "m",
                *options,
            ]
        )
        assert entry["scored_with"] == dataclasses.asdict(kwargs["scoring"]), view
    assert [e["scored_with"]["ranking_settings"]["limit"] for e in m["views"]] == [20, 1000, 50, 1000]
    assert m["searched_by"]["hybrid"] == ["search_arms", "fuse_reference"]
    assert m["searched_by"][ws.run_of("vipune")] == ["search_vipune"]
    assert m["searched_by"][ws.run_of("vipune-lib")] == ["search_vipune_lib"]
    assert set(m["searched_by"]) == {run.name for _, run in ws.scored()}
    assert {f.name for f in dataclasses.fields(Scoring)} == set(m["views"][0]["scored_with"])
