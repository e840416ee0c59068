"""One measurement in a fresh process: ``python child.py BENCH SYSTEM SCALE``.

Prints exactly one JSON line (the last line of stdout that starts with ``{"benchmark"``)
and exits non-zero when the measurement failed. Started by ``run.py``; not meant for
direct use, though running it by hand is a handy way to profile one system.
"""

from __future__ import annotations

import time

CHILD_START = time.time()  # before any other import, so start-up costs count

import json
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: child.py BENCH SYSTEM SCALE", file=sys.stderr)
        return 2
    name, system, scale = argv[0], argv[1], float(argv[2])
    if system.startswith("shardflow"):
        # First, as a user's script imports its engine at its top: shardflow chooses Arrow's
        # memory pool when it is imported before pyarrow (src/shardflow/_arrow_pool.py).
        import shardflow  # noqa: F401
    from registry import Unavailable, all_benchmarks, load_family
    from systems import shutdown

    bench = all_benchmarks()[name]
    if system not in bench.systems:
        print(f"{name} does not run on {system!r}; it runs on {bench.systems}", file=sys.stderr)
        return 2
    family = load_family(bench.family)
    try:
        try:
            measured = family.run(bench, system, scale)
        except Unavailable as exc:
            # Not a failure of the run: this system cannot express the benchmark (yet).
            line = {"benchmark": name, "system": system, "unavailable": str(exc)}
            print(json.dumps(line), flush=True)
            return 0
        t_result = measured.pop("t_result", None) or time.time()
        line = {
            "benchmark": name,
            "system": system,
            "scale": scale,
            "t_result": t_result,
            "child_s": t_result - CHILD_START,
            **measured,
        }
        print(json.dumps(line), flush=True)
    finally:
        shutdown(system)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
