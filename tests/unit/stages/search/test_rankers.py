"""How each family ranks (stages.search.rankers): one function per registry family."""

from vipune_eval.registry import retrievers as registry
from vipune_eval.stages.search import rankers


def test_every_family_of_the_registry_ranks_and_nothing_else_does():
    assert set(rankers.RANK) == set(registry.FAMILIES)
