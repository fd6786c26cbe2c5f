"""Counting tokens as vipune counts them: the model's own tokenizer.json, special tokens included,
never truncated (vipune refuses a text over 512 such tokens on add and search)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from vipune_eval.errors import EvalError

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer


def load_tokenizer(path: Path) -> Tokenizer:
    """The model's ``tokenizer.json``, counting special tokens, never truncating or padding."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for a damaged file
        raise EvalError(
            f"{path}: not a readable tokenizer.json ({str(exc)[:200]}); the model folder "
            "is damaged: copy or download it again"
        ) from exc
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


class BatchEncoder(Protocol):
    """A tokenizer's ``encode_batch`` (or ``encode_batch_fast``)."""

    def __call__(self, input: list[str], /, *, add_special_tokens: bool = True) -> list[Encoding]: ...


def encode_counting(tokenizer: Tokenizer) -> BatchEncoder:
    """The tokenizer's batch encoder for counting tokens: ``encode_batch_fast`` (no character
    offsets: about half the time) where the installed tokenizers has it."""
    encode: BatchEncoder = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
    return encode


# Pre-tokenizers that cut at every whitespace character, and normalizers that keep a line break
# whitespace: with one of the former and only the latter, no token spans a line break.
WHITESPACE_PRE_TOKENIZERS = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"}
KEEPING_NORMALIZERS = {"BertNormalizer", "NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents", "Strip"}


def _types(part: dict[str, Any] | None) -> list[str]:
    if not part:
        return []
    inner = part.get("pretokenizers") or part.get("normalizers") or []
    return [t for p in inner for t in _types(p)] if part.get("type") == "Sequence" else [part.get("type", "")]


def tokens_end_at_line_breaks(tokenizer: Tokenizer) -> bool:
    """True when no token of this tokenizer can span a line break, so a text's tokens are its
    lines' tokens counted one line at a time (special tokens aside). Read from its tokenizer.json:
    a whitespace-splitting pre-tokenizer (pre-tokenizers only split further), normalizers that
    leave a line break whitespace, and no added token holding one."""
    spec = json.loads(tokenizer.to_str())
    return (
        bool(WHITESPACE_PRE_TOKENIZERS & set(_types(spec.get("pre_tokenizer"))))
        and set(_types(spec.get("normalizer"))) <= KEEPING_NORMALIZERS
        and not any("\n" in t.get("content", "") for t in spec.get("added_tokens") or [])
    )


def count_tokens(model_dir: Path, texts: list[str], batch: int = 2000) -> np.ndarray:
    """Tokens per text with special tokens and without truncation (what vipune counts), in
    batches: the encodings of a whole shard of 2k-token texts at once would take gigabytes."""
    encode = encode_counting(load_tokenizer(model_dir / "tokenizer.json"))
    counts = np.zeros(len(texts), dtype=np.int32)
    for start in range(0, len(texts), batch):
        counts[start : start + batch] = [len(e) for e in encode(texts[start : start + batch])]
    return counts
