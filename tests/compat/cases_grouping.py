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
