"""embed: every unique text of a view once, with vipune's recipe, to Parquet.

vipune embeds with bge-small-en-v1.5's fp32 ``onnx/model.onnx``, mean pooling over the attention
mask and L2 normalisation (docs/vipune-contract.md). fastembed's built-in bge-small uses CLS
pooling on another file, so the recipe is registered as a custom fastembed model loaded from a
local folder. An empty text gets the zero vector, as vipune gives it.

Each shard file records the model fingerprint it was embedded with. A text another view has
already embedded with the same model (a question, a one-turn session that equals its turn row)
is copied from that view's shards instead of embedded again, so no text is embedded twice.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .io import EvalError, Progress, atomic_path, log, read_rows_with_ids
from .tokens import count_tokens, load_tokenizer

POOLINGS = {"mean": "MEAN", "cls": "CLS"}
DEFAULT_MAX_TOKENS = 512
MODEL_KEY = b"vipune_eval.model_fingerprint"


def embeddings_schema(dim: int, model_hash: str = "") -> pa.Schema:
    return pa.schema([("text_id", pa.string()), ("embedding", pa.list_(pa.float32(), dim)),
                      ("tokens", pa.int32()), ("truncated", pa.bool_())],
                     metadata={MODEL_KEY: model_hash.encode()})


def shard_of(text_id: str, shards: int) -> int:
    """Stable shard of a text: independent of the order texts were found in."""
    return int(text_id[:8], 16) % shards


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise EvalError(f"{path}: cannot read the model's JSON file ({exc}); the model folder is "
                        "damaged: copy or download it again") from exc


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
    """fastembed ``TextEmbedding`` for the ONNX file ``file`` in ``model_dir`` with ``pooling`` + L2."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    if pooling not in POOLINGS:
        raise EvalError(f"model.pooling must be one of {sorted(POOLINGS)}, got {pooling!r}")
    load_tokenizer(model_dir / "tokenizer.json")  # a damaged tokenizer is named, not the ONNX file
    dim = model_dim(model_dir)
    name = f"vipune-eval/{pooling}-{dim}/{file}"
    # The registry is process-global and add_custom_model refuses a name twice.
    if name not in {m["model"] for m in TextEmbedding.list_supported_models()}:
        TextEmbedding.add_custom_model(
            model=name, pooling=getattr(PoolingType, POOLINGS[pooling]), normalization=True,
            sources=ModelSource(hf=name), dim=dim, model_file=file)
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if cuda else ["CPUExecutionProvider"]
    try:
        return TextEmbedding(name, specific_model_path=str(model_dir), threads=threads,
                             providers=providers)
    except Exception as exc:  # fastembed raises assorted types for a broken model folder
        raise EvalError(f"cannot load the ONNX model {model_dir / file} with fastembed: {exc}") from exc


def embed_texts(model, texts: list[str], batch_size: int, progress: Progress) -> Iterable[np.ndarray]:
    for vector in model.embed(texts, batch_size=batch_size):
        progress.advance()
        yield vector


def model_hash(fingerprint: Path) -> str:
    """The model a shard was embedded with: a hash of its fingerprint file's text."""
    return hashlib.sha256(Path(fingerprint).read_bytes()).hexdigest()[:16]


def reusable(others: list[Path], wanted: set[str], model: str) -> dict[str, tuple[np.ndarray, int]]:
    """text id → (vector, tokens) of wanted texts already embedded with the same model."""
    found: dict[str, tuple[np.ndarray, int]] = {}
    for path in others:
        try:
            schema = pq.read_schema(path)
        except (OSError, pa.ArrowInvalid):
            continue
        if (schema.metadata or {}).get(MODEL_KEY, b"").decode() != model:
            continue
        missing = wanted - set(found)
        if not missing:
            break
        table = read_rows_with_ids(path, ["text_id", "embedding", "tokens"], missing)
        vectors = table.column("embedding").combine_chunks()
        matrix = vectors.values.to_numpy(zero_copy_only=False).reshape(-1, vectors.type.list_size)
        for tid, vector, tokens in zip(table.column("text_id").to_pylist(), matrix,
                                       table.column("tokens").to_pylist()):
            found[tid] = (vector, tokens)
    return found


def run_embed(texts: Path, model_dir: Path, file: str, pooling: str, shard: int, shards: int,
              out: Path, threads: int, batch_size: int, model_fingerprint: Path,
              reuse: list[Path] | None = None, cuda: bool = False, chunk: int = 2048) -> int:
    """Embed the texts of shard ``shard`` of ``shards``; returns how many were embedded (not
    copied from ``reuse``, other views' shards)."""
    table = pq.read_table(texts)
    mask = pa.array([shard_of(t, shards) == shard for t in table.column("text_id").to_pylist()])
    table = table.filter(mask)
    ids = table.column("text_id").to_pylist()
    strings = table.column("text").to_pylist()
    del table
    model_key = model_hash(model_fingerprint)
    copied = reusable([p for p in reuse or [] if Path(p).resolve() != Path(out).resolve()],
                      set(ids), model_key)
    todo = [i for i, tid in enumerate(ids) if tid not in copied and strings[i]]
    tokens = np.zeros(len(ids), dtype=np.int32)
    if todo:
        tokens[todo] = count_tokens(model_dir, [strings[i] for i in todo])
    # Length-sorted batches pad least: the model's cost follows the longest text of a batch.
    order = [todo[j] for j in np.argsort(tokens[todo], kind="stable")]
    limit = max_tokens(model_dir)
    dim = model_dim(model_dir)
    vectors = np.zeros((len(ids), dim), dtype=np.float32)  # empty texts keep the zero vector
    for i, tid in enumerate(ids):
        if tid in copied:
            vectors[i], tokens[i] = copied[tid]
    log.info("embed shard %d/%d: %d texts (%d copied from other views, %d empty), %d threads, "
             "batch %d", shard, shards, len(ids), len(copied),
             len(ids) - len(copied) - len(todo), threads, batch_size)
    if order:
        model = load_model(model_dir, file, pooling, threads=threads, cuda=cuda)
        progress = Progress(f"embed shard {shard}/{shards}: texts", total=len(order))
        for start in range(0, len(order), chunk):
            rows = order[start:start + chunk]
            block = np.stack(list(embed_texts(model, [strings[i] for i in rows], batch_size, progress)))
            if block.shape[1] != dim:
                raise EvalError(f"{model_dir / file} gives {block.shape[1]}-d vectors, config.json says {dim}")
            vectors[rows] = block
    schema = embeddings_schema(dim, model_key)
    with atomic_path(out) as tmp:
        pq.write_table(pa.table({
            "text_id": ids,
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
            "tokens": tokens,
            "truncated": tokens > limit,
        }, schema=schema), tmp, row_group_size=4096)  # readers take a shard's rows a group at a time
    return len(order)
