"""Loading a search shard: its pairs read in batches, a bounded number of personas in flight."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq

from vipune_eval.core.persona import shard_pair_count, shard_rows
from vipune_eval.stages.search.vipune_lane import in_order


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
