"""Writes docs/compatibility.md: ray.data 2.60's public names and their status in shardflow.

Run ``python tests/compat/gen_compat_table.py`` after changing the differential suite. A name
is "same" when a differential case covers it (the suite asserts identical results),
"different" when a test in test_documented_differences.py registers a deliberate
difference, "not tested yet" when shardflow has it but no case covers it, "not offered"
for the names of NOT_OFFERED (left out on purpose), and "not yet" when shardflow lacks it.
To extend the table, add cases (``@case(...)``) or differences (``@differs(...)``); names
come from ``ray.data.__all__``, the modules ``aggregate``, ``expressions``, ``context``,
``datasource`` and ``extensions``, and the public methods of Dataset, GroupedData and
DataIterator.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
OUTPUT = os.path.join(HERE, "..", "..", "docs", "compatibility.md")
# Every cases_*.py module, and the test modules that compare with Ray Data outside the registry.
CASE_MODULES = tuple(
    sorted(f[:-3] for f in os.listdir(HERE) if f.startswith("cases_") and f.endswith(".py"))
) + ("test_documented_differences", "test_a2a_vs_ray", "test_lerobot_vs_ray")


# ray.data's modules whose names are also ray.data's top-level names.
REEXPORTING_MODULES = ("context", "datasource", "extensions")

# Deliberate differences that belong to no single name (kept short; each is tested in the
# suite named).
BEHAVIOUR_NOTES = (
    "Order: `DataContext.execution_options.preserve_order` is True by default, so rows come in "
    "the order of the source and of `union`'s inputs (Ray Data: False, blocks as they finish). "
    "Set it to False for Ray Data's behaviour (tests/engine/execution/test_executor_protocol.py).",
    "`groupby(...).map_groups` and the grouped aggregations give groups sorted by key (Ray Data "
    "gives them in no set order) (tests/engine/execution/exchange/test_a2a_groupby.py).",
    "`sort` is stable: rows with equal keys keep their input order, also across read tasks "
    "and files, and `sort(...).take(k)` / `.limit(k)` give the same rows as the full sort "
    "(Ray Data orders ties across read tasks arbitrarily) "
    "(tests/engine/execution/exchange/test_top_k.py, tests/engine/plan/test_late_columns.py).",
    "`split(n)` gives splits whose row counts differ by at most one (Ray Data splits by blocks "
    "unless `equal=True`) (tests/compat/test_a2a_vs_ray.py compares sizes and rows).",
    "A failing read or map task is retried when its worker process died (up to "
    "`DataContext.max_task_retries`, 3 by default; Ray Data's tasks retry without end), and "
    "blocks the failed attempt already delivered are not delivered again "
    "(tests/faults/test_faults_retries.py). On Ray the retries are Ray's (`max_retries`), and "
    "the same count bounds the reruns that rebuild blocks lost with a node "
    "(tests/faults/test_faults_lineage.py).",
    "`iter_torch_batches(dtypes={...})` gives the columns the dict does not name their default "
    "dtype (Ray Data raises KeyError) (tests/engine/iteration/test_iteration_torch.py).",
    "`read_csv` / `read_json` over several files: a column whose inferred types conflict "
    "between files raises `ArrowConversionError` naming both files, however the data is "
    "consumed (Ray Data raises only when blocks are combined, and turns conflicting JSON "
    "fields into Python objects) (tests/connectors/test_schema_conflicts.py).",
    "`write_parquet` dictionary-encodes only string, binary and repetitive columns by default "
    "(Ray Data, through pyarrow, encodes every column); pass `use_dictionary` to choose. With "
    "snappy (the default codec) a column of plain numbers that snappy cannot shrink by a tenth "
    "(random floats) is stored uncompressed; pass `compression` as a dict to choose per column "
    "(tests/connectors/test_file_writes.py). Files whose columns are all flat and of common "
    "types (integers, floats, dates, timestamps, strings, binary), written with no options "
    "beyond `compression`, `use_dictionary` and `row_group_size`, are written by shardflow's "
    "own Parquet writer (created_by `shardflow version ...`): the same Parquet schema, stored "
    "Arrow schema and column-chunk statistics as pyarrow's writer gives (float statistics skip "
    "NaNs and count them), no statistics in data page headers, and a column chunk whose "
    "dictionary would pass 1 MiB is written plainly as a whole (pyarrow switches to plain "
    "pages midway); Arrow, Polars and DuckDB read the files back "
    "(tests/connectors/parquet/test_parquet_flat_writer.py).",
    "Writes are all-or-nothing and `mode` defaults to `'error'`; `write_*(resume=True)` "
    "resumes a failed or killed write, skipping the input it already wrote (a shardflow "
    "extension); a commit to an object store writes `_SUCCESS` last, and a commit killed "
    "midway is finished by the next write to the destination (tests/faults/).",
    "An execution makes Arrow's jemalloc pool the process's default memory pool (in the "
    "driver and in the worker processes and Ray workers that run its tasks), which lowers "
    "the peak memory of streaming reads and writes by a quarter or more; Ray Data leaves "
    "Arrow's default (mimalloc). `DataContext.arrow_memory_pool` chooses another pool or, "
    "with None, none; an `ARROW_DEFAULT_MEMORY_POOL` environment variable always wins. "
    "`import shardflow` before pyarrow is imported (on Linux) also makes jemalloc the pool "
    "of Arrow's C++ code that Python cannot give a pool to (the Parquet writer's and "
    "reader's buffers), by setting `ARROW_DEFAULT_MEMORY_POOL` while pyarrow is imported "
    "(tests/engine/execution/test_arrow_memory.py).",
    "`read_json(lines=True)` reads JSON Lines with Arrow's types, as `read_json` without "
    "`lines` does in both (Ray Data 2.60 reads `lines=True` through pandas: integer columns "
    "with nulls become doubles, strings `large_string`) "
    "(tests/compat/test_documented_differences.py).",
    "`read_csv` / `read_json` (JSON Lines) give blocks of the rows of about 2 MiB of text "
    "each (Ray Data: up to `target_max_block_size`); `repartition` or `map_batches` with a "
    "`batch_size` gives larger batches.",
)


def _load() -> tuple[dict[str, list[str]], dict[str, str]]:
    for name in CASE_MODULES:
        importlib.import_module(name)
    from harness import CASES, COVERED_BY_TESTS, DIFFERENCES

    covered: dict[str, list[str]] = {}
    for case_ in CASES:
        for name in case_.covers:
            covered.setdefault(name, []).append(case_.name)
    for name, tests in COVERED_BY_TESTS.items():
        covered.setdefault(name, []).extend(tests)
    _cover_reexports(covered)
    return covered, DIFFERENCES


def _cover_reexports(covered: dict[str, list[str]]) -> None:
    """``datasource.ReadTask`` is ``ray.data.ReadTask``: a case covering one covers both,
    when shardflow's two names are one object as well."""
    import ray.data as rd

    import shardflow

    for module_name in REEXPORTING_MODULES:
        module = importlib.import_module(f"ray.data.{module_name}")
        for name in _public_names(module):
            ours = _shardflow_object(module_name)
            same_in_ray = getattr(rd, name, None) is getattr(module, name, object())
            same_here = getattr(shardflow, name, None) is getattr(ours, name, object())
            if name in covered and same_in_ray and same_here:
                covered.setdefault(f"{module_name}.{name}", []).extend(covered[name])


def _ray_names() -> tuple[list[str], list[str]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import ray.data as rd
    functions = sorted(n for n in rd.__all__ if not n[0].isupper())
    classes = sorted(n for n in rd.__all__ if n[0].isupper())
    from ray.data import aggregate, context, datasource, expressions, extensions
    from ray.data.grouped_data import GroupedData

    methods = sorted(
        f"{cls.__name__}.{n}"
        for cls in (rd.Dataset, GroupedData, rd.DataIterator)
        for n in dir(cls)
        if not n.startswith("_")
    )
    extras = sorted(
        f"{module.__name__.rsplit('.', 1)[1]}.{n}"
        for module in (aggregate, expressions, context, datasource, extensions)
        for n in _public_names(module)
    )
    return functions + classes + extras, methods


def _public_names(module: object) -> list[str]:
    """``module.__all__``, or (for a module without one, as ``ray.data.context``) the
    public classes and functions it defines itself."""
    names = getattr(module, "__all__", None)
    if names is None:
        own = getattr(module, "__name__", "")
        names = [
            n
            for n, value in vars(module).items()
            if isinstance(value, type) or callable(value)
            if getattr(value, "__module__", None) == own
        ]
    return [n for n in names if not n.startswith("_")]


def _shardflow_has(name: str) -> bool:
    import shardflow
    import shardflow.sdk

    owner, _, attr = name.partition(".")
    if attr:
        return hasattr(_shardflow_object(owner), attr)
    return hasattr(shardflow, name) or hasattr(shardflow.sdk, name)


def _shardflow_object(owner: str) -> object:
    """shardflow's counterpart of ``ray.data``'s ``owner`` (a class or a module), or None."""
    import shardflow
    from shardflow.engine.api.grouped_data import GroupedData

    # DataContext's settings are instance attributes.
    known = {"GroupedData": GroupedData, "DataContext": shardflow.DataContext.get_current()}
    found = known.get(owner) or getattr(shardflow, owner, None)
    if found is None:
        try:
            found = importlib.import_module(f"shardflow.{owner}")
        except ImportError:
            return None
    return found


# Names shardflow leaves out on purpose, with the reason (no code of theirs can run beside
# shardflow or Ray Data 2.60).
_MARS = (
    "Mars (pymars 0.10.0, its last release, 2022) runs only with pandas < 2: it calls "
    "`DataFrame.iteritems`, removed in pandas 2.0, on its first `execute()`. shardflow needs "
    "pandas >= 2.0 and Ray Data 2.60 pandas >= 2.2.3, so no environment pip can resolve runs "
    "Ray Data's own `from_mars`/`to_mars` either. Convert through pandas on an older stack, "
    "or use Modin or Dask (`from_modin`, `from_dask`)."
)
NOT_OFFERED = {"from_mars": _MARS, "Dataset.to_mars": _MARS}


def _status(
    name: str, covered: dict[str, list[str]], differences: dict[str, str]
) -> tuple[str, str]:
    if name in differences:
        return "different", differences[name]
    if name in NOT_OFFERED:
        return "not offered", NOT_OFFERED[name]
    if not _shardflow_has(name):
        return "not yet", ""
    if name in covered:
        return "same", "cases: " + ", ".join(f"`{c}`" for c in sorted(set(covered[name])))
    return "not tested yet", ""


def render() -> str:
    covered, differences = _load()
    names, methods = _ray_names()
    lines = [
        "# Compatibility with Ray Data 2.60",
        "",
        "shardflow offers Ray Data's API: code written for `ray.data` runs after changing the",
        "import to `import shardflow as sf`. This page lists `ray.data`'s public names",
        "(`ray.data.__all__`, the names of `ray.data.aggregate`, `expressions`, `context`,",
        "`datasource` and `extensions`, and the public methods of `Dataset`) and their status:",
        "",
        "- **same**: the differential suite (tests/compat) runs the same code on both and finds",
        "  the same rows, dtypes, schemas, files and exception types;",
        "- **different**: a deliberate difference, with the reason;",
        "- **not tested yet**: shardflow has it, but no differential case covers it yet;",
        "- **not yet**: shardflow does not offer it yet;",
        "- **not offered**: left out on purpose, with the reason.",
        "",
        "Generated by `python tests/compat/gen_compat_table.py`; do not edit by hand.",
        "",
    ]
    for title, group in (
        ("Module functions and classes", names),
        ("Methods of Dataset, GroupedData and DataIterator", methods),
    ):
        lines += [f"## {title}", "", "| name | status | notes |", "| --- | --- | --- |"]
        for name in group:
            status, note = _status(name, covered, differences)
            lines.append(f"| `{name}` | {status} | {note} |")
        lines.append("")
    listed = set(names) | set(methods)
    extra = sorted(n for n in set(covered) | set(differences) if n not in listed)
    lines += [
        "## Other names covered by the suite",
        "",
        "| name | status | notes |",
        "| --- | --- | --- |",
    ]
    for name in extra:
        status, note = _status(name, covered, differences)
        lines.append(f"| `{name}` | {status} | {note} |")
    lines.append("")
    lines += ["## Differences in behaviour across the API", ""]
    lines += [f"- {note}" for note in BEHAVIOUR_NOTES]
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    text = render()
    with open(OUTPUT, "w") as f:
        f.write(text)
    print(f"wrote {os.path.normpath(OUTPUT)}")


if __name__ == "__main__":
    main()
