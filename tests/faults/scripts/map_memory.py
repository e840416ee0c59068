"""A row-wise ``map`` (worker processes) or ``map_batches`` (threads) over blocks of a million
rows at a small memory budget; prints what it measured as JSON.

Usage: python map_memory.py rows|batches BUDGET_MIB ROWS BLOCKS
Run in a fresh process. The resident memory of the whole process tree (this process, the
zygote and the worker processes) is sampled every 10 ms while the pipeline runs, after a
warm-up run that starts the workers and maps the code pages both runs need.
"""

import json
import sys
import threading
import time

import psutil

import shardflow as sf


def double_row(row: dict) -> dict:
    return {"id": row["id"], "y": row["id"] * 2}


def double_batch(batch: dict) -> dict:
    return {"id": batch["id"], "y": batch["id"] * 2}


def tree_rss(process: psutil.Process) -> int:
    total = 0
    for p in [process, *process.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:  # a worker that just exited
            pass
    return total


def run(mode: str, rows: int, blocks: int) -> tuple[int, int]:
    ds = sf.range(rows, override_num_blocks=blocks)
    ds = ds.map(double_row) if mode == "rows" else ds.map_batches(double_batch)
    count = total = 0
    for batch in ds.iter_batches(batch_size=None):
        count += len(batch["id"])
        total += int(batch["y"].sum())
    return count, total


def main() -> None:
    mode, budget_mib, rows, blocks = (
        sys.argv[1],
        int(sys.argv[2]),
        int(sys.argv[3]),
        int(sys.argv[4]),
    )
    sf.DataContext.get_current().memory_budget_bytes = budget_mib << 20
    run(mode, 20_000, 2)  # start the workers
    process = psutil.Process()
    base = tree_rss(process)
    peak = [base]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], tree_rss(process))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    count, total = run(mode, rows, blocks)
    seconds = time.perf_counter() - start
    stop.set()
    sampler.join()
    print(
        json.dumps({"rows": count, "sum": total, "rss_growth": peak[0] - base, "seconds": seconds})
    )


if __name__ == "__main__":
    main()
