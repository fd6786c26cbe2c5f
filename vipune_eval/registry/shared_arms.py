"""The shared arms every ARMS family ranks from: the dense arm and one bm25 arm per query form.

stages.search.arms computes them once per persona (the search_arms jobs); registry.retrievers
names its families' parameters from them. No imports: an edit elsewhere in the registry reruns no
search_arms job.
"""

DENSE_ARM = "dense"
BM25_QUERIES = ("and", "or")  # and: every word quoted, vipune's implicit AND; or: the words OR-ed


def bm25_arm(query: str) -> str:
    return f"bm25-{query}"


ARMS = (DENSE_ARM, *(bm25_arm(q) for q in BM25_QUERIES))
