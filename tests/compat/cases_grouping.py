"""Differential cases: groupby on several keys and on null keys, map_groups' arguments,
GroupedData.with_column. Each groupby costs Ray Data seconds, so each case does several."""

from __future__ import annotations

from harness import case, submodule

ROWS = [
    {"g": [1, 1, 2, None][i % 4], "h": "ab"[i % 2], "v": i, "w": float(i) / 2} for i in range(8)
]


def _ordered(rows):
    return sorted(rows, key=lambda r: repr(sorted(r.items())))


def _label_group(group, label, scale=1):
    group["label"] = [f"{label}{len(group['v'])}"] * len(group["v"])
    group["v"] = group["v"] * scale
    return group


@case(
    "Dataset.groupby",
    "GroupedData.count",
    "GroupedData.sum",
    "GroupedData.map_groups",
    note="several keys and null keys",
)
def groupby_on_several_and_null_keys(m, tmp):
    """count/sum by two keys; a null key is a group of its own; map_groups over two keys"""
    ds = m.from_items(ROWS, override_num_blocks=2)
    return [
        _ordered(ds.groupby(["g", "h"]).count().take_all()),
        _ordered(ds.groupby("g").sum("v").take_all()),
        _ordered(
            ds.groupby(["g", "h"])
            .map_groups(lambda df: df.head(1), batch_format="pandas")
            .take_all()
        ),
    ]


@case(
    "GroupedData.map_groups",
    "GroupedData.with_column",
    note="fn_args/fn_kwargs, concurrency and num_cpus as map_batches; with_column per group",
)
def map_groups_arguments_and_with_column(m, tmp):
    """map_groups with fn_args, fn_kwargs, concurrency, num_cpus; with_column of expressions"""
    col = submodule(m, "expressions").col
    rows = [{k: v for k, v in r.items() if k != "g"} for r in ROWS]
    grouped = m.from_items(rows, override_num_blocks=2).groupby("h")
    labelled = grouped.map_groups(
        _label_group,
        fn_args=("n",),
        fn_kwargs={"scale": 10},
        batch_format="numpy",
        concurrency=1,
        num_cpus=1,
    )
    return [
        _ordered(labelled.take_all()),
        _ordered(grouped.with_column("w2", col("w") * 2 + col("v")).take_all()),
    ]


@case(
    "read_parquet",
    "GroupedData.aggregate",
    note="string keys of a dictionary-encoded Parquet file (read as codes by shardflow)",
)
def groupby_dictionary_encoded_parquet_strings(m, tmp):
    """groupby a Parquet file's dictionary-encoded string column, alone and beside an int"""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    path = os.path.join(tmp, "words.parquet")
    if not os.path.exists(path):
        words = ["pear", "fig", None, "apple", "fig", "pear"] * 5
        table = pa.table(
            {"s": words, "g": [i % 3 for i in range(30)], "v": [i / 4 for i in range(30)]}
        )
        pq.write_table(table, path, row_group_size=10)
    a = submodule(m, "aggregate")
    ds = m.read_parquet(path)
    alone = ds.groupby("s").aggregate(a.Count(), a.Sum("v"), a.Mean("v"))
    beside = ds.groupby(["g", "s"]).aggregate(a.Count(), a.Sum("v"))
    return [
        alone.schema(),
        _ordered(alone.take_all()),
        beside.schema(),
        _ordered(beside.take_all()),
    ]
