"""Loading a search shard: its pairs read in batches, a bounded number of personas in flight."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq

from support.imports import RECORDER, asked
from vipune_eval.core.persona import shard_pair_count, shard_rows
from vipune_eval.stages.search.vipune import in_order


def test_shard_rows_takes_every_nth_pair_across_row_groups(tmp_path):
    path = tmp_path / "rows.parquet"
    table = pa.table({"question_id": [f"q{i}" for i in range(150)], "row_keys": [[f"k{i}"] * 3 for i in range(150)]})
    pq.write_table(table, path, row_group_size=50)  # batches of 64 straddle the row groups
    for shards in (1, 7, 200):
        got = [shard_rows(path, s, shards) for s in range(shards)]
        for s, pairs in enumerate(got):
            assert pairs.column("question_id").to_pylist() == [f"q{i}" for i in range(s, 150, shards)]
            assert pairs.num_rows == shard_pair_count(path, s, shards)
        assert sum(t.num_rows for t in got) == 150
    assert shard_rows(path, 3, 7).to_pylist()[0] == {"question_id": "q3", "row_keys": ["k3"] * 3}


def test_in_order_keeps_the_order_and_draws_only_a_window_ahead():
    drawn, handed, ahead = [0], [0], []
    lock = threading.Lock()

    def items():
        for i in range(40):
            with lock:
                drawn[0] += 1
                ahead.append(drawn[0] - handed[0])
            yield i

    def work(i):
        time.sleep(0.002 * (i % 3))  # out-of-order completion
        return i * i

    with ThreadPoolExecutor(max_workers=2) as pool:
        out = []
        for r in in_order(pool, work, items(), window=4):
            out.append(r)
            handed[0] += 1
    assert out == [i * i for i in range(40)]
    assert max(ahead) <= 4  # map() would have drawn all 40 before the first result


def test_a_shards_personas_are_read_without_importing_pandas(tmp_path):
    """pyarrow imports pandas on its first pa.array() or to_numpy() (0.2 s of CPU per search job):
    a shard's personas come with their exact vectors and texts, and pandas never loaded."""
    import json
    import subprocess
    import sys

    import numpy as np

    rng = np.random.default_rng(1)
    ids = [f"t{i}" for i in range(9)]
    vectors = rng.standard_normal((9, 4)).astype(np.float32)
    pq.write_table(pa.table({"text_id": ids, "text": [f"text {i}" for i in range(9)]}), tmp_path / "texts.parquet")
    pq.write_table(
        pa.table(
            {
                "text_id": ids[::-1],
                "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors[::-1].ravel()), 4),
                "tokens": pa.array(range(9), pa.int32()),
            }
        ),
        tmp_path / "embeddings.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "question_id": ["q0", "q1", "q2"],
                "question": ["a?", "b?", "c?"],
                "question_text_id": ["t8", "t7", "t6"],
                "row_keys": [["k0", "k1"], ["k2"], ["k3", "k4"]],
                "row_sessions": [["s0", "s1"], ["s2"], ["s3", "s4"]],
                "row_created_at": [["d"] * 2, ["d"], ["d"] * 2],
                "row_docs": [["s0", "s1"], ["s2"], ["s3", "s4"]],
                "row_text_ids": [["t0", "t1"], ["t2"], ["t3", "t5"]],
            }
        ),
        tmp_path / "rows.parquet",
    )
    script = (
        RECORDER
        + f"""
import json
from pathlib import Path
from vipune_eval.core.persona import personas_of_shard
d = Path({str(tmp_path)!r})
got = [(p.question_id, p.texts, p.vectors.tolist(), p.query_vector.tolist())
       for p in personas_of_shard(d / "rows.parquet", d / "texts.parquet", [d / "embeddings.parquet"], 0, 2)]
print(json.dumps({{"pandas": {asked(("pandas",))}, "personas": got}}))
"""
    )
    out = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout)
    assert out["personas"] == [
        ["q0", ["text 0", "text 1"], vectors[[0, 1]].tolist(), vectors[8].tolist()],
        ["q2", ["text 3", "text 5"], vectors[[3, 5]].tolist(), vectors[6].tolist()],
    ]
    assert not out["pandas"], "reading a shard's personas imported pandas"


def test_a_personas_digests_follow_its_data_and_its_vectors_apart():
    """Issue 52: what a search was made from: the data digest moves with a text (another dataset),
    the vectors digest with a vector (another model), each alone."""
    import dataclasses

    import numpy as np

    from vipune_eval.core.persona import Persona

    p = Persona(
        question_id="q1",
        question="where?",
        row_ids=["q1::a", "q1::b"],
        session_ids=["a", "b"],
        created_at=["2023-01-01T00:00:00Z"] * 2,
        texts=["one", "two"],
        vectors=np.eye(2, 4, dtype=np.float32),
        query_vector=np.ones(4, np.float32),
    )
    data, vectors = p.digests()
    assert len(data) == len(vectors) == 16 and p.digests() == dataclasses.replace(p).digests()
    other_text = dataclasses.replace(p, texts=["one", "three"]).digests()
    assert other_text[0] != data and other_text[1] == vectors
    other_vector = dataclasses.replace(p, query_vector=np.zeros(4, np.float32)).digests()
    assert other_vector[0] == data and other_vector[1] != vectors
