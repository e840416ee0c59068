"""B19: the driver on a simulated multi-node Ray cluster, shardflow and Ray Data side by side.

    python benchmarks/b19_cluster.py                          # every part (tens of minutes)
    python benchmarks/b19_cluster.py --parts tasks --blocks 1000,10000
    python benchmarks/b19_cluster.py --parts nodes --nodes 1,2,3 --node-blocks 5000
    python benchmarks/b19_cluster.py --parts workloads --scale 0.5
    python benchmarks/b19_cluster.py --systems shardflow --json b19.json

A ``ray.cluster_utils.Cluster`` runs on this machine, on 127.0.0.1 only: a head node without
CPUs (only drivers run there, as on a real cluster's head) and worker nodes of one CPU and a
small object store each. Every measurement is a fresh driver process that joins it
(``shardflow.init(backend="ray", address=...)`` or ``ray.init(address=...)`` for Ray Data),
so that what the driver spends is measured alone: its wall time, its CPU time (all its
threads, ``time.process_time``) and the growth of its resident memory over its state after a
warm-up run (sampled every 10 ms). The cluster's own processes are not counted.

Parts:

- ``tasks``: how many tasks per second the driver launches and tracks, and what each block
  costs it: ``range(B, override_num_blocks=B).map_batches(noop).materialize()`` (one task and
  one block per block of eight rows; the driver holds every block's reference at the end),
  for each B of ``--blocks``, on ``--workers`` worker nodes.
- ``nodes``: the same with ``--node-blocks`` blocks on clusters of each size in ``--nodes``.
- ``workloads``: the same pipelines on both systems over the same Parquet files: read, map
  and write; a random shuffle; a sort; a groupby-aggregate; an actor-pool map. Results are
  checked against each other and against NumPy.

Measured figures and what they mean are in docs/scaling.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEMS = ("shardflow", "ray-data")
WORKLOADS = ("read-map-write", "random_shuffle", "sort", "groupby", "actor-map")
FILES, ROWS_PER_FILE = 16, 250_000  # at scale 1: 4M rows, ~200 MB in memory
RESULT = "B19 RESULT "  # a driver's line of results starts with this


def loopback_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
        RAY_USAGE_STATS_ENABLED="0",
        SHARDFLOW_DISABLE_PROGRESS_BARS="1",
    )
    env.pop("RAY_ADDRESS", None)
    return env


# -- the parent: one cluster per size, one driver process per measurement ----------------


class SimulatedCluster:
    """A head node without CPUs and ``workers`` nodes of one CPU each, on 127.0.0.1."""

    def __init__(self, workers: int, store_mb: int, attempts: int = 3):
        os.environ.update(loopback_env())
        # Ray gives a node 30 s to register with the head, which a loaded machine can miss:
        # then whatever started is killed and the start is tried again.
        for attempt in range(attempts):
            try:
                self._start(workers, store_mb)
                return
            except Exception as exc:
                if attempt == attempts - 1:
                    raise
                print(f"[cluster start failed ({exc}); trying again]", file=sys.stderr)
                _kill_descendants()

    def _start(self, workers: int, store_mb: int) -> None:
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 0,
                "object_store_memory": store_mb << 20,
                "include_dashboard": False,
            },
        )
        for _ in range(workers):
            self.cluster.add_node(num_cpus=1, object_store_memory=store_mb << 20)
        self.cluster.wait_for_nodes()
        self.address = self.cluster.address

    def shutdown(self) -> None:
        self.cluster.shutdown()


def _kill_descendants() -> None:
    import psutil

    children = psutil.Process().children(recursive=True)
    for child in children:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(children, timeout=30)


def measure(request: dict, timeout_s: float) -> dict:
    """Run one measurement in a fresh driver process; its JSON line."""
    proc = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(request)],
        capture_output=True,
        text=True,
        env=loopback_env(),
        timeout=timeout_s,
        check=False,
    )
    lines = [line[len(RESULT) :] for line in proc.stdout.splitlines() if line.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-12:])
        return {**request, "error": f"exit {proc.returncode}: {tail}"}
    return json.loads(lines[-1])


def prepare_files(folder: str, scale: float) -> int:
    """The workloads' input: FILES Parquet files; returns the rows."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = max(1000, int(ROWS_PER_FILE * scale))
    rng = np.random.default_rng(13)
    # Distinct values (a sort's order is then unique) whose sums are exact in any order.
    values = rng.permutation(rows * FILES).astype(np.float64) / 1024
    for i in range(FILES):
        ids = np.arange(i * rows, (i + 1) * rows, dtype=np.int64)
        table = pa.table(
            {
                "id": ids,
                "k": rng.integers(0, 1000, rows),
                "v": values[i * rows : (i + 1) * rows],
                "s": [f"s{j % 9973}" for j in ids],
            }
        )
        pq.write_table(table, os.path.join(folder, f"part-{i:02d}.parquet"))
    return rows * FILES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--parts", default="tasks,nodes,workloads")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--blocks", default="1000,10000,100000")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--nodes", default="1,2,3")
    parser.add_argument("--node-blocks", type=int, default=10_000)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--store-mb", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    if args.child:
        return run_child(json.loads(args.child))
    parts = [p for p in args.parts.split(",") if p]
    systems = [s for s in args.systems.split(",") if s]
    unknown = [p for p in parts if p not in ("tasks", "nodes", "workloads")]
    unknown += [s for s in systems if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown part(s) or system(s): {unknown}")
    print(
        f"B19 on {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start",
        flush=True,
    )
    results: list[dict] = []
    sizes = sorted({args.workers, *(int(n) for n in args.nodes.split(","))})
    for workers in sizes:
        plan = []
        if "tasks" in parts and workers == args.workers:
            plan += [("tasks", int(b)) for b in args.blocks.split(",")]
        if "nodes" in parts and str(workers) in args.nodes.split(","):
            plan += [("nodes", args.node_blocks)]
        if "workloads" in parts and workers == args.workers:
            plan += [("workloads", None)]
        if not plan:
            continue
        cluster = SimulatedCluster(workers, args.store_mb)
        folder = tempfile.mkdtemp(prefix="shardflow-b19-")
        try:
            for part, blocks in plan:
                jobs = [{"workload": "tasks", "blocks": blocks}] if blocks else []
                if part == "workloads":
                    rows = prepare_files(folder, args.scale)
                    jobs = [{"workload": w, "input": folder, "rows": rows} for w in WORKLOADS]
                for job in jobs:
                    for system in systems:
                        request = {
                            **job,
                            "part": part,
                            "system": system,
                            "workers": workers,
                            "address": cluster.address,
                            "out": os.path.join(folder, f"out-{system}-{job['workload']}"),
                        }
                        result = measure(request, args.timeout)
                        results.append(result)
                        print(format_line(result), flush=True)
                        check(results)
        finally:
            cluster.shutdown()
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    if args.json:
        with open(args.json, "w") as file:
            json.dump(results, file, indent=1)
    return 1 if any("error" in r or r.get("wrong") for r in results) else 0


def format_line(r: dict) -> str:
    what = f"{r['part']:9} {r['workload']:14} {r['system']:9} nodes={r['workers']}"
    if "blocks" in r and r.get("blocks"):
        what += f" blocks={r['blocks']}"
    if "error" in r:
        return f"{what}  ERROR {r['error']}"
    line = (
        f"{what}  {r['seconds']:.2f} s wall, driver {r['driver_cpu_s']:.2f} s CPU, "
        f"+{r['driver_rss_growth'] / 2**20:.0f} MiB RSS"
    )
    if r.get("blocks"):
        line += (
            f" ({r['blocks'] / r['seconds']:.0f} tasks/s, "
            f"{1e6 * r['driver_cpu_s'] / r['blocks']:.0f} us CPU and "
            f"{r['driver_rss_growth'] / r['blocks'] / 1024:.1f} KiB per block)"
        )
    return line


def check(results: list[dict]) -> None:
    """The two systems' results of one workload must agree."""
    last = results[-1]
    peers = [
        r
        for r in results[:-1]
        if r.get("workload") == last.get("workload")
        and r.get("workers") == last.get("workers")
        and r.get("blocks") == last.get("blocks")
        and "error" not in r
    ]
    for peer in peers:
        if "error" not in last and peer.get("result") != last.get("result"):
            last["wrong"] = (
                f"{last['system']} {last['result']} != {peer['system']} {peer['result']}"
            )
            print(f"WRONG {last['wrong']}", flush=True)


# -- a driver process ---------------------------------------------------------------------


def noop(batch: Any) -> Any:
    return batch


def add_score(batch: Any) -> Any:
    import pyarrow.compute as pc

    return batch.append_column("score", pc.add(pc.multiply(batch["v"], 2.0), batch["k"]))


class Scorer:
    """The actor-pool workload's class: a per-actor constant, as a loaded model would be."""

    def __init__(self):
        self.weight = 2.0

    def __call__(self, batch: Any) -> Any:
        import pyarrow.compute as pc

        return batch.append_column("score", pc.multiply(batch["v"], self.weight))


def run_child(request: dict) -> int:
    import threading

    import psutil

    system = request["system"]
    if system == "shardflow":
        import shardflow as sf

        sf.init(backend="ray", address=request["address"], log_to_driver=False)
        engine: Any = sf
    else:
        import ray

        ray.init(address=request["address"], log_to_driver=False)
        import ray.data

        ray.data.DataContext.get_current().enable_progress_bars = False
        engine = ray.data
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import it
    run = WORKLOAD_RUNS[request["workload"]]
    run(engine, request, warmup=True)  # first use: imports, workers, connections
    me = psutil.Process()
    baseline = me.memory_info().rss
    peak = [baseline]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], me.memory_info().rss)
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    cpu, wall = time.process_time(), time.perf_counter()
    sampler.start()
    try:
        result = run(engine, request, warmup=False)
    finally:
        seconds = time.perf_counter() - wall
        driver_cpu = time.process_time() - cpu
        done.set()
        sampler.join()
    line = {
        **{k: v for k, v in request.items() if k != "address"},
        "seconds": seconds,
        "driver_cpu_s": driver_cpu,
        "driver_rss_growth": max(0, peak[0] - baseline),
        "result": result,
    }
    print(RESULT + json.dumps(line), flush=True)
    return 0


def run_tasks(engine: Any, request: dict, warmup: bool) -> Any:
    blocks = 32 if warmup else request["blocks"]
    ds = engine.range(8 * blocks, override_num_blocks=blocks).map_batches(noop)
    materialized = ds.materialize()
    return materialized.count()


def _read(engine: Any, request: dict, warmup: bool) -> Any:
    if warmup:
        files = sorted(os.listdir(request["input"]))[:1]
        return engine.read_parquet([os.path.join(request["input"], f) for f in files])
    return engine.read_parquet(request["input"])


def run_read_map_write(engine: Any, request: dict, warmup: bool) -> Any:
    import shutil

    import pyarrow.parquet as pq

    out = request["out"] + ("-warmup" if warmup else "")
    shutil.rmtree(out, ignore_errors=True)
    _read(engine, request, warmup).map_batches(add_score, batch_format="pyarrow").write_parquet(out)
    table = pq.read_table(out, columns=["id", "score"])
    shutil.rmtree(out, ignore_errors=True)
    return [
        table.num_rows,
        int(table["id"].to_numpy().sum()),
        round(float(table["score"].to_numpy().sum()), 3),
    ]


def run_random_shuffle(engine: Any, request: dict, warmup: bool) -> Any:
    ids_sum, rows = 0, 0
    for batch in (
        _read(engine, request, warmup)
        .random_shuffle(seed=3)
        .iter_batches(batch_size=None, batch_format="pyarrow")
    ):
        rows += batch.num_rows
        ids_sum += int(batch["id"].to_numpy().sum())
    return [rows, ids_sum]


def run_sort(engine: Any, request: dict, warmup: bool) -> Any:
    """Every sorted batch in order into a checksum that depends on the order."""
    import numpy as np

    previous, rows, checksum = -1.0, 0, 0
    for batch in (
        _read(engine, request, warmup)
        .sort("v")
        .iter_batches(batch_size=None, batch_format="pyarrow")
    ):
        values = batch["v"].to_numpy()
        if len(values):
            assert values[0] >= previous and (values[1:] >= values[:-1]).all(), "not sorted"
            previous = values[-1]
        positions = np.arange(rows, rows + len(values)) % 1009
        checksum += int((batch["id"].to_numpy() * positions).sum())
        rows += len(values)
    return [rows, checksum]


def run_groupby(engine: Any, request: dict, warmup: bool) -> Any:
    rows = _read(engine, request, warmup).groupby("k").sum("v").take_all()
    return [len(rows), round(sum(r["sum(v)"] for r in rows), 3)]


def run_actor_map(engine: Any, request: dict, warmup: bool) -> Any:
    ds = _read(engine, request, warmup).map_batches(
        Scorer, batch_format="pyarrow", concurrency=2, num_cpus=0.5
    )
    rows, total = 0, 0.0
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        rows += batch.num_rows
        total += float(batch["score"].to_numpy().sum())
    return [rows, round(total, 3)]


WORKLOAD_RUNS = {
    "tasks": run_tasks,
    "read-map-write": run_read_map_write,
    "random_shuffle": run_random_shuffle,
    "sort": run_sort,
    "groupby": run_groupby,
    "actor-map": run_actor_map,
}


if __name__ == "__main__":
    sys.exit(main())
