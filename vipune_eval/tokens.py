"""Counting tokens as vipune counts them: the model's own tokenizer.json, special tokens included,
never truncated (vipune refuses a text over 512 such tokens on add and search)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .io import EvalError


def load_tokenizer(path: Path):
    """The model's ``tokenizer.json``, counting special tokens, never truncating or padding."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for a damaged file
        raise EvalError(f"{path}: not a readable tokenizer.json ({str(exc)[:200]}); the model folder "
                        "is damaged: copy or download it again") from exc
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def count_tokens(model_dir: Path, texts: list[str], batch: int = 2000) -> np.ndarray:
    """Tokens per text with special tokens and without truncation (what vipune counts), in
    batches: the encodings of a whole shard of 2k-token texts at once would take gigabytes."""
    tokenizer = load_tokenizer(model_dir / "tokenizer.json")
    counts = np.zeros(len(texts), dtype=np.int32)
    for start in range(0, len(texts), batch):
        counts[start:start + batch] = [len(e.ids) for e in tokenizer.encode_batch(texts[start:start + batch])]
    return counts
