"""search-family: a family that ranks from the persona's own texts (registry Kind.PERSONA: bm25-lme),
over one shard of personas."""

from __future__ import annotations

from pathlib import Path

from vipune_eval.core import trec
from vipune_eval.core.io import Progress
from vipune_eval.core.persona import ShardSearch
from vipune_eval.errors import EvalError
from vipune_eval.registry import retrievers as registry
from vipune_eval.registry.retrievers import Kind
from vipune_eval.stages.search import rankers


def run_family(shard: ShardSearch, retriever: str, out: Path, rank_all: bool = False) -> None:
    """The run of ``retriever`` (a preset name or a spec's canonical JSON) over one shard; a run
    lists at most the shard's ``ranking_settings.depth`` documents per pair."""
    s = registry.from_argument(retriever)
    if s.kind is not Kind.PERSONA:
        raise EvalError(f"search-family runs families that rank from the persona, got {retriever}")
    ranked = []
    progress = Progress(f"family {s.name} {shard.name}: personas", total=shard.pair_count())
    for persona in shard.personas():
        indices = rankers.rank(persona, s, shard.ranking_settings.limit, rank_all)[0]
        ranked.append(
            (
                persona.question_id,
                persona.documents([(persona.row_ids[i], 0.0) for i in indices.tolist()], shard.ranking_settings),
            )
        )
        progress.advance()
    trec.write_run(out, ranked, s.name)
