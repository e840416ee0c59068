"""Runs one exchange over data about 3x the memory budget and prints what it measured as JSON.

Usage: python exchange_memory.py {shuffle,sort} BUDGET_MIB ROWS
Run in a fresh process so the allocator's state of other work does not blur the figure.
"""

import json
import sys
import threading
import time

import numpy as np
import psutil

import shardflow as sf


def main() -> None:
    op, budget_mib, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    sf.DataContext.get_current().memory_budget_bytes = budget_mib << 20
    ds = sf.range(rows, override_num_blocks=48).map_batches(
        lambda b: {"id": b["id"], "x": np.sin(b["id"] * 0.001), "y": b["id"] * 3}
    )
    # Warm up: the first run of each operation maps code pages of Arrow's kernels (tens of
    # MiB of resident memory that do not depend on the data).
    warm = ds.limit(20000)
    list((warm.random_shuffle(seed=1) if op == "shuffle" else warm.sort("x")).iter_batches())
    process = psutil.Process()
    base = process.memory_info().rss
    peak = [base]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out = ds.random_shuffle(seed=7) if op == "shuffle" else ds.sort("x")
    count, total, ordered, previous = 0, 0, True, -np.inf
    for batch in out.iter_batches(batch_size=None):
        count += len(batch["id"])
        total += int(batch["id"].sum())
        if op == "sort" and len(batch["x"]):
            ordered = (
                ordered
                and bool(batch["x"][0] >= previous)
                and bool(np.all(np.diff(batch["x"]) >= 0))
            )
            previous = batch["x"][-1]
    stop.set()
    sampler.join()
    print(
        json.dumps(
            {
                "rows": count,
                "sum": total,
                "ordered": ordered,
                "data_bytes": rows * 24,
                "rss_growth": peak[0] - base,
                "stats": out.stats(),
            }
        )
    )


if __name__ == "__main__":
    main()
