"""embed: every unique text once, with vipune's recipe, to Parquet.

vipune embeds with bge-small-en-v1.5's fp32 ``onnx/model.onnx``, mean pooling over the attention
mask and L2 normalisation (docs/vipune-contract.md). fastembed's built-in bge-small uses CLS
pooling on another file, so the recipe is registered as a custom fastembed model loaded from a
local folder, its graph less the softmax NaN guards torch's export adds (``onnx_graph``: exact, and
40 % of a 512-token text's time). An empty text gets the zero vector, as vipune gives it.

Batches are cut by a token budget (``embed.batch_tokens``; ``auto``: the provider's measured best,
``provider.AUTO_BUDGET``) from texts of one token length (after the model's truncation): no padded
position is computed. On the CPU a text's vector is then bit for bit the vector it gets alone
(onnxruntime's CPU kernels compute each row of a batch the same way whatever the batch size or
thread count; checked by tests/unit/stages/embed/test_embed.py and benchmarks/bench_embed_flops.py). On a GPU the
bits depend on the batch's shape, so every call for texts of one length has the same number of
rows (``provider``: fixed shapes, a probe per job). Either way a text's vector does not depend on
which other texts a job happened to embed, so one content-addressed store (``store.VectorStore``,
one per provider) serves every view: each unique text is embedded once, by whichever job claims
it first, and gets the same bytes whoever that was.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from vipune_eval.core.io import Progress, atomic_path, log, read_parquet
from vipune_eval.core.model_files import ModelFiles
from vipune_eval.core.tokens import count_tokens, load_tokenizer
from vipune_eval.errors import EvalError
from vipune_eval.stages.embed.onnx_graph import runnable_folder
from vipune_eval.stages.embed.provider import Provider, batch_rows, no_cuda, resolve
from vipune_eval.stages.embed.store import DamagedPart, VectorStore
from vipune_eval.stages.embed.tally import Tally, encoder_shape

POOLINGS = {"mean": "MEAN", "cls": "CLS"}
DEFAULT_MAX_TOKENS = 512
MODEL_KEY = b"vipune_eval.model_fingerprint"
# Part of the store's key beside the model fingerprint: bump it when a change here alters vectors,
# so vectors stored by the older code are not served again.
RECIPE_VERSION = 1


def embeddings_schema(dim: int, model_hash: str = "", tally: Tally | None = None) -> pa.Schema:
    return pa.schema(
        [
            ("text_id", pa.string()),
            ("embedding", pa.list_(pa.float32(), dim)),
            ("tokens", pa.int32()),
            ("truncated", pa.bool_()),
        ],
        metadata={MODEL_KEY: model_hash.encode(), **(tally.metadata() if tally else {})},
    )


def shard_of(text_id: str, shards: int) -> int:
    """Stable shard of a text: independent of the order texts were found in."""
    return int(text_id[:8], 16) % shards


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise EvalError(
            f"{path}: cannot read the model's JSON file ({exc}); the model folder is damaged: copy or download it again"
        ) from exc


def model_dim(model_dir: Path) -> int:
    config = model_dir / "config.json"
    return int(_json(config).get("hidden_size", 384)) if config.is_file() else 384


def max_tokens(model_dir: Path) -> int:
    config = model_dir / "tokenizer_config.json"
    if config.is_file():
        value = _json(config).get("model_max_length", DEFAULT_MAX_TOKENS)
        if isinstance(value, int) and 0 < value < 100_000:
            return value
    return DEFAULT_MAX_TOKENS


def load_model(model_dir: Path, file: str, pooling: str, threads: int | None, cuda: bool = False):
    """fastembed ``TextEmbedding`` for the ONNX file ``file`` in ``model_dir`` with ``pooling`` + L2.

    The session runs the graph less its softmax NaN guards (``onnx_graph.runnable_folder``), from a
    temporary folder gone once the session is made: embed in this process (fastembed's
    ``parallel=`` workers would load the model again from that folder). ``cuda`` asks onnxruntime
    for its CUDA provider and refuses to fall back to the CPU silently."""
    import onnxruntime
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    if pooling not in POOLINGS:
        raise EvalError(f"model.pooling must be one of {sorted(POOLINGS)}, got {pooling!r}")
    if cuda and "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        raise no_cuda(f"onnxruntime has no CUDA provider here ({', '.join(onnxruntime.get_available_providers())})")
    load_tokenizer(model_dir / "tokenizer.json")  # a damaged tokenizer is named, not the ONNX file
    dim = model_dim(model_dir)
    name = f"vipune-eval/{pooling}-{dim}/{file}"
    # The registry is process-global and add_custom_model refuses a name twice.
    if name not in {m["model"] for m in TextEmbedding.list_supported_models()}:
        TextEmbedding.add_custom_model(
            model=name,
            pooling=getattr(PoolingType, POOLINGS[pooling]),
            normalization=True,
            sources=ModelSource(hf=name),
            dim=dim,
            model_file=file,
        )
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if cuda else ["CPUExecutionProvider"]
    try:
        with runnable_folder(model_dir, file) as folder:
            model = TextEmbedding(name, specific_model_path=str(folder), threads=threads, providers=providers)
    except EvalError:
        raise
    except Exception as exc:  # fastembed raises assorted types for a broken model folder
        raise EvalError(f"cannot load the ONNX model {model_dir / file} with fastembed: {exc}") from exc
    if cuda:  # fastembed only warns when the session came up without CUDA
        session = getattr(getattr(model, "model", None), "model", None)
        active = session.get_providers() if session is not None else []
        if "CUDAExecutionProvider" not in active:
            raise no_cuda(f"the model's session runs on {', '.join(active) or 'nothing'}, not on CUDA")
    return model


def token_batches(lengths: np.ndarray, budget: int) -> list[np.ndarray]:
    """Indices of texts cut into model calls: each batch holds texts of one token length L, at most
    ``batch_rows(L, budget)`` of them (one text when it alone is longer than the budget), shortest
    texts first. No padded position is computed."""
    lengths = np.asarray(lengths)
    order = np.argsort(lengths, kind="stable")
    batches: list[np.ndarray] = []
    for group in np.split(order, np.flatnonzero(np.diff(lengths[order])) + 1):
        if len(group):
            size = batch_rows(lengths[group[0]], budget)
            batches += [group[i : i + size] for i in range(0, len(group), size)]
    return batches


def call_texts(texts: list[str], length: int, budget: int, fixed_shapes: bool) -> list[str]:
    """The texts of one model call: ``texts`` (all of ``length`` tokens), and with ``fixed_shapes``
    copies of the first one until the call has ``batch_rows(length, budget)`` rows, the shape every
    call for that length has, whatever texts a job happened to claim."""
    return texts + texts[:1] * (batch_rows(length, budget) - len(texts) if fixed_shapes else 0)


def rows_alike(model, texts: list[str], lengths: np.ndarray, budget: int) -> bool | None:
    """Whether the model computes a text's row alike wherever it sits in a batch of fixed shape:
    one full batch of texts of one length against the same batch rotated by one row (each text at
    another position, beside other texts), compared bit for bit. None when no two texts share a
    length. Two model calls; run once per job on a provider with fixed shapes."""
    values, counts = np.unique(np.asarray(lengths), return_counts=True)
    if not len(counts) or counts.max() < 2:
        return None
    length = int(values[counts.argmax()])
    group = [t for t, n in zip(texts, lengths) if n == length]
    rows = batch_rows(length, budget)
    if rows < 2:
        return None
    batch = (group * rows)[:rows]
    first = np.stack(list(model.embed(batch, batch_size=rows)))
    rotated = np.stack(list(model.embed(batch[1:] + batch[:1], batch_size=rows)))
    return bool(np.array_equal(np.roll(first, -1, axis=0), rotated))


def embed_batched(
    model,
    texts: list[str],
    lengths: np.ndarray,
    budget: int,
    progress: Progress,
    flush,
    every: int = 2048,
    tally: Tally | None = None,
    fixed_shapes: bool = False,
) -> None:
    """Embed ``texts`` in token-budget batches (with ``fixed_shapes``, each of the full shape for
    its length: ``call_texts``); ``flush(indices, vectors)`` receives them in groups of about
    ``every`` texts (so a killed job keeps what it finished); ``tally`` times the model calls."""
    done_rows: list[np.ndarray] = []
    done_vectors: list[np.ndarray] = []
    tally = tally or Tally()
    for batch in token_batches(lengths, budget):
        length = int(lengths[batch[0]])
        call = call_texts([texts[i] for i in batch], length, budget, fixed_shapes)
        with tally.timed(lengths[batch], filler=len(call) - len(batch)):
            vectors = np.stack(list(model.embed(call, batch_size=len(call))))[: len(batch)]
        done_rows.append(batch)
        done_vectors.append(vectors.astype(np.float32, copy=False))
        progress.advance(len(batch))
        if sum(len(r) for r in done_rows) >= every:
            flush(np.concatenate(done_rows), np.concatenate(done_vectors))
            done_rows, done_vectors = [], []
    if done_rows:
        flush(np.concatenate(done_rows), np.concatenate(done_vectors))


def model_hash(fingerprint: Path) -> str:
    """The model a shard was embedded with: a hash of its fingerprint file's text."""
    return hashlib.sha256(Path(fingerprint).read_bytes()).hexdigest()[:16]


def _embed_claimed(
    store: VectorStore,
    model,
    model_dir: Path,
    claimed: list[str],
    texts: dict[str, str],
    budget: int,
    limit: int,
    what: str,
    tally: Tally,
    provider: Provider,
) -> None:
    """Embed the texts this job claimed and store them; ``limit``: the model's token limit."""
    strings = [texts[t] for t in claimed]
    tokens = count_tokens(model_dir, strings)
    seen = np.minimum(tokens, limit)
    dim = store.dim
    if provider.fixed_shapes and tally.rows_alike is None:
        tally.rows_alike = rows_alike(model, strings, seen, budget)
        if tally.rows_alike is False:
            log.warning(
                "embed on %s: a text's vector changed with its position in a batch of fixed shape "
                "(probe: one batch against itself rotated by a row): two runs can differ in the "
                "last bits; embed.batch_tokens: 1 (one text per call) gives the same bytes every "
                "run, at a fraction of the speed",
                provider.device,
            )
        elif tally.rows_alike:
            log.info(
                "embed on %s: a text's vector does not depend on its position or neighbours in a batch "
                "of fixed shape (probe): the same bytes whichever job embeds it",
                provider.device,
            )

    def flush(rows: np.ndarray, vectors: np.ndarray) -> None:
        if vectors.shape[1] != dim:
            raise EvalError(f"the model in {model_dir} gives {vectors.shape[1]}-d vectors, config.json says {dim}")
        store.put([claimed[i] for i in rows], vectors, tokens[rows])

    progress = Progress(what, total=len(claimed))
    embed_batched(model, strings, seen, budget, progress, flush, tally=tally, fixed_shapes=provider.fixed_shapes)


def run_embed(
    texts: Path,
    model: ModelFiles,
    shard: int,
    shards: int,
    out: Path,
    threads: int,
    batch_tokens: int | str,
    model_fingerprint: Path,
    store: Path,
    cuda: bool = False,
) -> int:
    """Embed shard ``shard`` of ``shards`` of a view's texts through the vector store at ``store``
    and write its vectors to ``out``; returns how many texts this job embedded itself (texts
    stored already or claimed by a concurrent job are read from the store). ``batch_tokens``: a
    number, or ``auto`` for the provider's measured best."""
    started = time.perf_counter()
    provider = resolve(cuda)
    budget, source = provider.budget(batch_tokens)
    table = read_parquet(texts)
    mask = pa.array([shard_of(t, shards) == shard for t in table.column("text_id").to_pylist()])
    table = table.filter(mask)
    ids = table.column("text_id").to_pylist()
    by_id = dict(zip(ids, table.column("text").to_pylist()))
    del table
    key, dim, limit = model_hash(model_fingerprint), model_dim(model.model_dir), max_tokens(model.model_dir)
    vectors_store = VectorStore(store, provider.store_key(f"{key}-r{RECIPE_VERSION}", budget), dim)
    wanted = {t for t, s in by_id.items() if s}  # empty texts keep the zero vector
    log.info(
        "embed shard %d/%d: %d texts (%d empty) on %s (%s), %d threads, batches of at most %d tokens (%s)%s",
        shard,
        shards,
        len(ids),
        len(ids) - len(wanted),
        provider.name.upper(),
        provider.device,
        threads,
        budget,
        source,
        ", each of the full shape for its text length" if provider.fixed_shapes else "",
    )
    loaded, computed, already, pending = None, 0, None, set(wanted)
    tally = Tally(
        threads=threads,
        shape=encoder_shape(model.model_dir),
        provider=provider.name,
        device=provider.device,
        batch_tokens=budget,
    )
    order = [t for t in ids if t in wanted]
    found, counted = np.zeros((0, dim), np.float32), np.zeros(0, np.int32)
    while pending:
        mine, stored, others = vectors_store.claim(pending)
        already = len(stored) if already is None else already
        try:
            if mine:
                if loaded is None:
                    with tally.loading():
                        loaded = load_model(model.model_dir, model.file, model.pooling, threads, cuda)
                _embed_claimed(
                    vectors_store,
                    loaded,
                    model.model_dir,
                    sorted(mine),
                    by_id,
                    budget,
                    limit,
                    f"embed shard {shard}/{shards}: texts",
                    tally,
                    provider,
                )
                computed += len(mine)
        finally:
            vectors_store.release()
        vectors_store.wait_for(others)  # a job that died leaves its texts unclaimed: next round
        pending = pending - vectors_store.stored_ids()
        if not pending and order:
            try:
                found, counted = vectors_store.get(order)
            except DamagedPart:  # set aside while read: its texts are not stored any more
                pending = wanted - vectors_store.stored_ids()
    vectors_store.report(computed, already or 0, len(wanted) - computed - (already or 0))
    tally.job_seconds = time.perf_counter() - started
    vectors = np.zeros((len(ids), dim), dtype=np.float32)
    tokens = np.zeros(len(ids), dtype=np.int32)
    rows = [i for i, t in enumerate(ids) if t in wanted]
    vectors[rows], tokens[rows] = found, counted
    with atomic_path(out) as tmp:
        pq.write_table(
            pa.table(
                {
                    "text_id": ids,
                    "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
                    "tokens": tokens,
                    "truncated": tokens > limit,
                },
                schema=embeddings_schema(dim, key, tally),
            ),
            tmp,
            row_group_size=4096,
        )  # readers take a group at a time
    return computed
