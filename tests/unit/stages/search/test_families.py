"""How each family ranks (stages.search.families): one function per registry family."""

from vipune_eval.registry import retrievers as registry
from vipune_eval.stages.search import families


def test_every_family_of_the_registry_ranks_and_nothing_else_does():
    assert set(families.RANK) == set(registry.FAMILIES)
