"""fuse-reference: one family setting's runs, fused from every shard's shared arms (no search)."""

from __future__ import annotations

from pathlib import Path

from vipune_eval.core import trec
from vipune_eval.core.ranking_settings import RankingSettings
from vipune_eval.errors import EvalError
from vipune_eval.registry import retrievers as registry
from vipune_eval.registry.retrievers import Kind
from vipune_eval.stages.search import rankers
from vipune_eval.stages.search.arms import read_arms


def run_fuse_reference(
    arms: list[Path], retriever: str, ranking_settings: RankingSettings, outputs: list[Path], rank_all: bool = False
) -> None:
    """One family setting's run files, one per arms file (a search shard), from the shared arms."""
    if len(arms) != len(outputs):
        raise EvalError(f"{len(arms)} arms files for {len(outputs)} outputs")
    s = registry.from_argument(retriever)
    if s.kind is not Kind.ARMS:
        raise EvalError(f"{retriever} is not a family setting fused from the arms")
    for path, out in zip(arms, outputs):
        trec.write_run(
            out,
            [
                (a.question_id, a.documents(rankers.rank(a, s, ranking_settings.limit, rank_all)[0], ranking_settings))
                for a in read_arms(path)
            ],
            s.name,
        )
