"""Counting tokens as vipune counts them: which tokenizers may have each line counted alone."""

import pytest
from tokenizers import AddedToken, normalizers, pre_tokenizers

from support.tinymodel import build_tiny_model
from vipune_eval.core.tokens import load_tokenizer, tokens_end_at_line_breaks


@pytest.mark.parametrize(
    "change, alone",
    [
        (lambda t: None, True),
        (
            lambda t: setattr(
                t, "normalizer", normalizers.Sequence([normalizers.Replace("\n", "_"), normalizers.Lowercase()])
            ),
            False,
        ),
        (lambda t: setattr(t, "pre_tokenizer", pre_tokenizers.Metaspace()), False),
        (
            lambda t: setattr(
                t, "pre_tokenizer", pre_tokenizers.Sequence([pre_tokenizers.Digits(), pre_tokenizers.Whitespace()])
            ),
            True,
        ),
        (lambda t: t.add_tokens([AddedToken("a\nb")]), False),
    ],
)
def test_which_tokenizers_count_each_line_alone(tmp_path, change, alone):
    """Only a tokenizer whose tokens cannot span a line break may have its lines counted alone."""
    tokenizer = load_tokenizer(build_tiny_model(tmp_path / "model") / "tokenizer.json")
    change(tokenizer)
    assert tokens_end_at_line_breaks(tokenizer) is alone
