"""The report's manifest: the roles of the configured runs, found by setting (plan.manifest)."""

from vipune_eval.plan import manifest
from vipune_eval.registry import retrievers as registry


def test_vipune_presets_name_the_reference_run_they_mirror():
    specs = registry.resolve(["vipune", "vipune-semantic", {"name": "h", "use": "hybrid"}, "dense"])
    assert manifest.mirror_of(specs[0], specs) == "h"
    assert manifest.mirror_of(specs[1], specs) == "dense"
    assert manifest.mirror_of(specs[0], specs[:2]) is None


def test_the_report_roles_are_found_by_setting_not_by_name():
    specs = registry.resolve([{"name": "b", "use": "bm25"}, {"name": "h", "use": "hybrid", "k": 25},
                              "hybrid-or", {"name": "h60", "use": "hybrid", "k": 60}])
    assert manifest.roles(specs) == {"bm25_and": "b", "hybrid_and": "h", "hybrid_or": "hybrid-or"}
    assert manifest.roles(registry.resolve(["dense"])) == dict.fromkeys(manifest.ROLES)
