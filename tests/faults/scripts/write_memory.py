"""CSV -> map_batches -> write_parquet at a small memory budget; prints what it measured as JSON.

Usage: python write_memory.py CSV_PATH OUT_DIR BUDGET_MIB
Run in a fresh process so the allocator's state of other work does not blur the figure. The
resident memory of the whole process tree (this process and any worker processes) is sampled
every 10 ms in a thread while the pipeline runs.
"""

import json
import os
import sys
import threading
import time

import psutil
import pyarrow as pa
import pyarrow.compute as pc

import shardflow as sf

WARM_BYTES = 20 << 20


def add_columns(batch: pa.Table) -> pa.Table:
    return batch.append_column("y", pc.multiply(batch["x"], 2.0)).append_column(
        "label_len", pc.utf8_length(batch["label"])
    )


def tree_rss(process: psutil.Process) -> int:
    total = 0
    for p in [process, *process.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:  # a worker that just exited
            pass
    return total


def run(csv_path: str, out_dir: str) -> None:
    sf.read_csv(csv_path).map_batches(add_columns, batch_format="pyarrow").write_parquet(out_dir)


def main() -> None:
    csv_path, out_dir, budget_mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sf.DataContext.get_current().memory_budget_bytes = budget_mib << 20
    # Warm up on the file's first WARM_BYTES: the code pages of Arrow's CSV reader, kernels
    # and Parquet writer are mapped, and the allocator's per-thread heaps grow to the size
    # that one chunk's work needs, once, whatever the data's size.
    warm = os.path.join(out_dir, "warm.csv")
    with open(csv_path, "rb") as src, open(warm, "wb") as dst:
        dst.write(src.read(WARM_BYTES))
        dst.write(src.readline())
    run(warm, os.path.join(out_dir, "warm"))
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
    run(csv_path, os.path.join(out_dir, "out"))
    seconds = time.perf_counter() - start
    stop.set()
    sampler.join()
    print(
        json.dumps(
            {
                "rss_growth": peak[0] - base,
                "seconds": seconds,
                "arrow_peak": pa.default_memory_pool().max_memory(),
            }
        )
    )


if __name__ == "__main__":
    main()
