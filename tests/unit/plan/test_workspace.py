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
