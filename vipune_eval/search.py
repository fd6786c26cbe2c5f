"""search: run the retrievers over one shard of personas and write TREC run files."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .embed import Vectors
from .io import EvalError, Progress, atomic_path, log, read_json
from .reference import Persona, Ranking, search_persona
from .sources import isolated_env, sha256_file
from .vipune import Vipune


def personas_of_shard(pairs_path: Path, texts_path: Path, embeddings: list[Path], shard: int,
                      shards: int) -> Iterator[Persona]:
    """The shard's personas (every ``shards``-th pair, from ``shard``) with texts and vectors."""
    pairs = pq.read_table(pairs_path).to_pylist()[shard::shards]
    needed = {t for p in pairs for t in [p["question_text_id"], *p["session_text_ids"]]}
    table = pq.read_table(texts_path, filters=pc.field("text_id").isin(pa.array(sorted(needed))))
    text = dict(zip(table.column("text_id").to_pylist(), table.column("text").to_pylist()))
    vectors = Vectors(embeddings)
    for pair in pairs:
        qid = pair["question_id"]
        yield Persona(
            question_id=qid, question=pair["question"],
            row_ids=[f"{qid}::{sid}" for sid in pair["session_ids"]],
            session_ids=pair["session_ids"], created_at=pair["session_created_at"],
            texts=[text[t] for t in pair["session_text_ids"]],
            vectors=vectors.get(pair["session_text_ids"]),
            query_vector=vectors.get([pair["question_text_id"]])[0])


def write_run(path: Path, rankings: list[tuple[Persona, Ranking]], tag: str) -> None:
    """TREC run lines ``qid Q0 docid rank score tag``; scores strictly decreasing, from the rank."""
    lines = []
    for persona, ranking in rankings:
        for rank, (rid, _) in enumerate(ranking, start=1):
            lines.append(f"{persona.question_id} Q0 {persona.session_of(rid)} {rank} "
                         f"{len(ranking) - rank + 1} {tag}\n")
    with atomic_path(path) as tmp:
        tmp.write_text("".join(lines), encoding="utf-8")


def run_reference(pairs: Path, texts: Path, embeddings: list[Path], shard: int, shards: int,
                  retrievers: list[str], limit: int, outputs: list[Path]) -> None:
    personas = list(personas_of_shard(pairs, texts, embeddings, shard, shards))
    progress = Progress(f"reference shard {shard}/{shards}: personas", total=len(personas))
    results: dict[str, list[tuple[Persona, Ranking]]] = {name: [] for name in retrievers}
    for persona in personas:
        for name, ranking in search_persona(persona, retrievers, limit).items():
            results[name].append((persona, ranking))
        progress.advance()
    for name, out in zip(retrievers, outputs):
        write_run(out, results[name], name)


def run_vipune(pairs: Path, texts: Path, embeddings: list[Path], shard: int, shards: int,
               binary: Path, fingerprint: Path, hf_home: Path, limit: int, threads: int,
               timeout: float, workdir: Path, out: Path) -> None:
    expected = read_json(fingerprint)["sha256"]
    actual = sha256_file(binary)
    if actual != expected:
        raise EvalError(f"{binary} (sha256 {actual[:12]}) is not the binary this result belongs to "
                        f"({fingerprint}, sha256 {expected[:12]}); rerun snakemake so it re-plans")
    personas = list(personas_of_shard(pairs, texts, embeddings, shard, shards))
    workdir.mkdir(parents=True, exist_ok=True)
    env = isolated_env({"HF_HOME": str(hf_home.resolve()), "HF_HUB_OFFLINE": "1"}, workdir / "xdg")
    client = Vipune(binary, env, timeout)
    progress = Progress(f"vipune shard {shard}/{shards}: personas", total=len(personas))
    log.info("vipune shard %d/%d: %d personas, %d concurrent calls", shard, shards, len(personas), threads)

    def one(persona: Persona) -> tuple[Persona, Ranking]:
        result = client.evaluate(persona, limit, workdir)
        progress.advance()
        return persona, result.ranking

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        rankings = list(pool.map(one, personas))
    write_run(out, rankings, "vipune")
