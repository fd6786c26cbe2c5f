"""A plugin file the plugin tests write (``mine/plug.py``): ``newest_first`` ranks by date,
``scored`` by similarity with scores, ``answer`` returns what the test sets ``ANSWER`` to."""

import textwrap

PLUGIN = textwrap.dedent("""\
    import numpy as np

    def newest_first(haystack, k):
        order = sorted(range(len(haystack.row_ids)), key=lambda i: haystack.created_at[i], reverse=True)
        return [haystack.row_ids[i] for i in order[:k]]

    def scored(haystack, k):
        sims = haystack.vectors @ haystack.question_vector
        best = np.argsort(-sims, kind="stable")[:k]
        return [(haystack.row_ids[i], float(sims[i])) for i in best]

    def answer(haystack, k):
        return ANSWER(haystack, k)

    ANSWER = None
    """)
