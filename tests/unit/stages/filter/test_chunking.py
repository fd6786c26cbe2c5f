"""Chunk rows: a session's lines packed greedily into rows of at most 512 tokens by the model's own
tokenizer, each step on its own, and the fallback for a tokenizer whose tokens straddle a line break."""

from support.tinymodel import build_tiny_model
from vipune_eval.core.tokens import load_tokenizer
from vipune_eval.stages.filter.chunking import Chunker


def test_chunker_packs_greedily_and_gives_a_recurring_session_the_same_rows(tmp_path):
    model = build_tiny_model(tmp_path / "model")
    tokenizer = load_tokenizer(model / "tokenizer.json")
    count = lambda text: len(tokenizer.encode(text).ids)  # noqa: E731
    words = [f"w{i % 97}" for i in range(3000)]
    lines = [f"user: {' '.join(words[i : i + n])}" for i, n in zip(range(0, 3000, 200), [30, 90, 700, 5, 260] * 4)]
    chunker = Chunker(model / "tokenizer.json")
    assert chunker.counts_lines_alone  # a BERT pre-tokenizer: each line counted on its own
    first = chunker(lines)
    assert chunker(list(lines)) == first  # the kept packing of a session seen before
    assert all(count(c) <= 512 for c in first)
    # Greedy: no chunk could have taken the next chunk's first line (or piece) as well.
    for c, following in zip(first, first[1:]):
        assert count(c + "\n" + following.split("\n")[0]) > 512
    assert "".join(" ".join(first).split()) == "".join(" ".join(lines).split())
    assert chunker(lines[:2]) == ["\n".join(lines[:2])]


def test_chunker_steps_one_at_a_time(tmp_path):
    """Issue 28: the chunker's steps, each on its own (count, split_long, plan, fast_plan)."""
    model = build_tiny_model(tmp_path / "model")
    chunker = Chunker(model / "tokenizer.json", max_tokens=12)
    assert chunker.special == 2 and chunker.count("w1 w2") == 4
    long = " ".join(f"w{i}" for i in range(25))
    spans = chunker.split_long(long)
    assert all(chunker.count(long[a:b]) <= 12 for a, b in spans)
    assert " ".join(long[a:b] for a, b in spans) == long and len(spans) == 3
    lines = ["w1 w2 w3", "w4 w5 w6 w7", "w8", long]
    slow = chunker.plan(lines)
    assert chunker.fast_plan(lines) == slow  # WordPiece splits at whitespace: the two paths agree
    # greedy by hand: 2 special + 3 + 4 + 1 = 10 tokens fit in one row; the long line's 25 words
    # become spans of 10, 10 and 5, none of which fits beside another row's tokens
    assert slow == (((0, 0, 8), (1, 0, 11), (2, 0, 2)), *(((3, a, b),) for a, b in spans))
    rows = [Chunker.text(lines, parts) for parts in slow]
    assert all(chunker.count(r) <= 12 for r in rows)
    assert chunker(lines) == rows


def test_chunker_falls_back_to_counting_every_row_when_tokens_straddle_line_breaks(tmp_path):
    """Issue 23's fast path adds each line's tokens; a tokenizer that does not split at a newline
    (here: words split on spaces only, "a\\nb" one token) must not get rows packed on that sum."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    words = [f"w{i}" for i in range(40)]
    tokenizer = Tokenizer(
        models.WordLevel(vocab={w: i for i, w in enumerate(["[UNK]", "[CLS]", "[SEP]", *words])}, unk_token="[UNK]")
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Split(" ", "removed")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
    )
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    count = lambda text: len(load_tokenizer(path).encode(text).ids)  # noqa: E731
    lines = [" ".join(words[i % 40] for i in range(n)) for n in (8, 9)]
    assert count("\n".join(lines)) == 2 + 8 + 9 - 1  # "w7\nw0" is one token: counts do not add
    chunker = Chunker(path, max_tokens=10)
    assert not chunker.counts_lines_alone  # splitting at spaces only: a line break may sit inside a token
    rows = chunker(lines)
    assert all(count(r) <= 10 for r in rows)
    assert "".join(" ".join(rows).split()) == "".join(" ".join(lines).split())
    for r, following in zip(rows, rows[1:]):  # greedy on the real counts
        assert count(r + "\n" + following.split("\n")[0]) > 10
    assert rows[0] == lines[0]  # the second line (11 tokens alone) is split, not packed whole
