"""Chunk rows: a session's turn lines packed into rows of at most 512 tokens (what vipune's add and
search accept) by the model's own tokenizer."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain
from pathlib import Path

import numpy as np

from vipune_eval.core.io import text_id
from vipune_eval.core.tokens import encode_counting, load_tokenizer, tokens_end_at_line_breaks

MAX_ROW_TOKENS = 512  # what vipune's add/search accept (special tokens counted)
RECOUNT_MARGIN = 16  # rows this close to the limit are counted again on the fast path

Part = tuple[int, int, int]  # (line index, first character, end character)
Plan = tuple[tuple[Part, ...], ...]  # the parts of each row


class Chunker:
    """Greedy packing of a session's turn lines into rows of at most ``max_tokens`` tokens by the
    model's own tokenizer (special tokens counted, as vipune counts them); a turn longer than
    that is split at token boundaries. A session recurs in many haystacks: its packing is kept
    (as character spans, not texts) by the hash of its lines and computed once.

    Fast path (``fast_plan``): each line's tokens are counted once and the packing adds those
    counts. When no token straddles a line break (true of WordPiece and other tokenizers that
    split at whitespace) that is what counting each candidate row gives (checked on M-shaped data:
    rows identical to the slow path). A tokenizer known from its tokenizer.json to end every token
    at a line break (``tokens.tokens_end_at_line_breaks``: BERT's, bge-small's) has the lines
    counted alone, in one batch call without offsets; any other has the session tokenized whole and
    each line's tokens read from the offsets. Rows within a few tokens of the limit are counted
    again; a session whose tokens straddle a break, or whose near-limit row does not come out as
    added, is packed the slow way (``plan``), counting every candidate row."""

    def __init__(self, tokenizer_path: Path, max_tokens: int = MAX_ROW_TOKENS) -> None:
        self.tokenizer = load_tokenizer(tokenizer_path)
        self.max_tokens = max_tokens
        self.counts_lines_alone = tokens_end_at_line_breaks(self.tokenizer)  # which fast path
        self._encode_lines = encode_counting(self.tokenizer)
        self.special = self.count("")
        self._plans: dict[str, Plan] = {}

    def __call__(self, lines: list[str]) -> list[str]:
        """The rows of a session's lines."""
        key = text_id("\x00".join(lines))
        if key not in self._plans:
            self._plans[key] = (self.fast_plan(lines) if lines else None) or self.plan(lines)
        return [self.text(lines, parts) for parts in self._plans[key]]

    def count(self, text: str) -> int:
        """Tokens of ``text`` as vipune counts them (special tokens included)."""
        return len(self.tokenizer.encode(text).ids)

    @staticmethod
    def text(lines: list[str], parts: Iterable[Part]) -> str:
        return "\n".join(lines[i][a:b] for i, a, b in parts)

    def split_long(self, line: str) -> list[tuple[int, int]]:
        """Spans of ``line``, each at most ``max_tokens`` tokens, cut at token boundaries."""
        offsets = self.tokenizer.encode(line, add_special_tokens=False).offsets
        budget = self.max_tokens - self.special
        spans, start = [], 0
        while start < len(offsets):
            end = min(start + budget, len(offsets))
            while True:
                a, b = offsets[start][0], offsets[end - 1][1]
                piece = line[a:b]
                a, b = a + len(piece) - len(piece.lstrip()), b - len(piece) + len(piece.rstrip())
                if self.count(line[a:b]) <= self.max_tokens or end - start <= 1:
                    break
                end -= max(1, (end - start) // 20)
            if b > a:
                spans.append((a, b))
            start = end
        return spans

    def plan(self, lines: list[str]) -> Plan:
        """The slow path: every candidate row counted whole."""
        out: list[tuple[Part, ...]] = []
        current: list[Part] = []
        for i, line in enumerate(lines):
            spans = [(0, len(line))] if self.count(line) <= self.max_tokens else self.split_long(line)
            for a, b in spans:
                if current and self.count(self.text(lines, [*current, (i, a, b)])) <= self.max_tokens:
                    current.append((i, a, b))
                else:
                    if current:
                        out.append(tuple(current))
                    current = [(i, a, b)]
        if current:
            out.append(tuple(current))
        return tuple(out)

    def line_tokens(self, lines: list[str]) -> np.ndarray | None:
        """Tokens (without special tokens) of each line; None when a token straddles a line
        break (the counts would not add up)."""
        if self.counts_lines_alone:
            return np.fromiter(
                (len(e) for e in self._encode_lines(lines, add_special_tokens=False)), np.int64, len(lines)
            )
        starts = np.cumsum([0] + [len(line) + 1 for line in lines])  # each line's first character
        spans = self.tokenizer.encode("\n".join(lines), add_special_tokens=False).offsets
        offsets = np.fromiter(chain.from_iterable(spans), np.int64, 2 * len(spans)).reshape(-1, 2)
        line = np.searchsorted(starts, offsets[:, 0], side="right") - 1
        if (offsets[:, 1] > starts[line + 1] - 1).any():
            return None
        return np.bincount(line, minlength=len(lines))

    def fast_plan(self, lines: list[str]) -> Plan | None:
        """The packing from each line's token count; None when it cannot be trusted."""
        tokens = self.line_tokens(lines)
        if tokens is None:
            return None
        out: list[tuple[Part, ...]] = []
        sizes: list[int] = []
        current: list[Part] = []
        size = self.special
        for i, line in enumerate(lines):
            if tokens[i] + self.special <= self.max_tokens:
                pieces = [(0, len(line), int(tokens[i]))]
            else:
                pieces = [(a, b, self.count(line[a:b]) - self.special) for a, b in self.split_long(line)]
            for a, b, n in pieces:
                if current and size + n <= self.max_tokens:
                    current.append((i, a, b))
                    size += n
                else:
                    if current:
                        out.append(tuple(current))
                        sizes.append(size)
                    current, size = [(i, a, b)], self.special + n
        if current:
            out.append(tuple(current))
            sizes.append(size)
        # Rows near the limit are counted again: a tokenizer whose counts did not add up across the
        # line breaks after all sends the session down the slow path rather than over the limit.
        near = [i for i, n in enumerate(sizes) if n > self.max_tokens - RECOUNT_MARGIN]
        if any(self.count(self.text(lines, out[i])) != sizes[i] for i in near):
            return None
        return tuple(out)
