"""embed: every unique text once, with vipune's recipe, to Parquet.

vipune embeds with bge-small-en-v1.5's fp32 ``onnx/model.onnx``, mean pooling over the attention
mask and L2 normalisation. fastembed's built-in bge-small uses CLS pooling on another file, so the
recipe is registered as a custom fastembed model loaded from a local folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .io import EvalError, Progress, atomic_path, log

POOLINGS = {"mean": "MEAN", "cls": "CLS"}
DEFAULT_MAX_TOKENS = 512


def embeddings_schema(dim: int) -> pa.Schema:
    return pa.schema([("text_id", pa.string()), ("embedding", pa.list_(pa.float32(), dim)),
                      ("tokens", pa.int32()), ("truncated", pa.bool_())])


def shard_of(text_id: str, shards: int) -> int:
    """Stable shard of a text: independent of the order texts were found in."""
    return int(text_id[:8], 16) % shards


def model_dim(model_dir: Path) -> int:
    config = model_dir / "config.json"
    if config.is_file():
        return int(json.loads(config.read_text()).get("hidden_size", 384))
    return 384


def max_tokens(model_dir: Path) -> int:
    config = model_dir / "tokenizer_config.json"
    if config.is_file():
        value = json.loads(config.read_text()).get("model_max_length", DEFAULT_MAX_TOKENS)
        if isinstance(value, int) and 0 < value < 100_000:
            return value
    return DEFAULT_MAX_TOKENS


def load_model(model_dir: Path, file: str, pooling: str, threads: int | None, cuda: bool = False):
    """fastembed ``TextEmbedding`` for the ONNX file ``file`` in ``model_dir`` with ``pooling`` + L2."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    if pooling not in POOLINGS:
        raise EvalError(f"model.pooling must be one of {sorted(POOLINGS)}, got {pooling!r}")
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


def count_tokens(model_dir: Path, texts: list[str]) -> np.ndarray:
    """Tokens per text with special tokens and without truncation (what vipune counts)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return np.array([len(e.ids) for e in tokenizer.encode_batch(texts)], dtype=np.int32)


def embed_texts(model, texts: list[str], batch_size: int, progress: Progress) -> Iterable[np.ndarray]:
    for vector in model.embed(texts, batch_size=batch_size):
        progress.advance()
        yield vector


def run_embed(texts_path: Path, model_dir: Path, file: str, pooling: str, shard: int, shards: int,
              out: Path, threads: int, batch_size: int, chunk: int = 2048, cuda: bool = False) -> int:
    """Embed the texts of shard ``shard`` of ``shards``; returns how many were embedded."""
    table = pq.read_table(texts_path)
    mask = pa.array([shard_of(t, shards) == shard for t in table.column("text_id").to_pylist()])
    table = table.filter(mask)
    ids = table.column("text_id").to_pylist()
    texts = table.column("text").to_pylist()
    del table
    tokens = count_tokens(model_dir, texts)
    # Length-sorted batches pad least: the model's cost follows the longest text of a batch.
    order = np.argsort(tokens, kind="stable")
    limit = max_tokens(model_dir)
    model = load_model(model_dir, file, pooling, threads=threads, cuda=cuda)
    dim = model_dim(model_dir)
    schema = embeddings_schema(dim)
    progress = Progress(f"embed shard {shard}/{shards}: texts", total=len(texts))
    log.info("embed shard %d/%d: %d texts, %d threads, batch %d", shard, shards, len(texts), threads, batch_size)
    with atomic_path(out) as tmp:
        with pq.ParquetWriter(tmp, schema) as writer:
            for start in range(0, len(order), chunk):
                rows = order[start:start + chunk]
                vectors = np.stack(list(embed_texts(model, [texts[i] for i in rows], batch_size, progress)))
                if vectors.shape[1] != dim:
                    raise EvalError(f"{model_dir / file} gives {vectors.shape[1]}-d vectors, config.json says {dim}")
                writer.write_table(pa.table({
                    "text_id": [ids[i] for i in rows],
                    "embedding": pa.FixedSizeListArray.from_arrays(
                        pa.array(vectors.astype(np.float32).ravel()), dim),
                    "tokens": tokens[rows],
                    "truncated": tokens[rows] > limit,
                }, schema=schema))
    return len(texts)
