"""vipune's contract as constants: what the harness relies on, each from vipune's source and
checked against the binary (docs/vipune-contract.md, the preflight). No imports: every module
that needs one of these reaches this file only, so editing the client reruns no reference search.
"""

MAX_SEARCH_LIMIT = 10_000  # vipune's MAX_SEARCH_LIMIT: --limit must be 1..10000
MAX_TOKENS = 512  # add/search refuse a text over this many tokens (special tokens counted)
EXIT_TOO_LONG = 3  # the exit code of that refusal
RRF_K = 25  # hybrid search: score = sum of 1 / (RRF_K + rank), ranks from 1


def candidate_pool(limit: int) -> int:
    """Candidates per arm of a hybrid search: clamp(10 x limit, 50, MAX_SEARCH_LIMIT)."""
    return min(max(limit * 10, 50), MAX_SEARCH_LIMIT)


# The model vipune embeds with (its built-in profile); an import header must name it.
EMBED_MODEL_ID = "BAAI/bge-small-en-v1.5"
EMBED_MODEL_REVISION = "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"
