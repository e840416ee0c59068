"""Moving data between XShards partitions: ``repartition``, ``partition_by`` and ``zip``.

Each turns the Dataset of the input partitions into a Dataset over a :class:`DeferredSource`:
when the result first runs, the input partitions are computed (or taken as they are when they
were computed before), the driver plans from what their blocks hold (types, lengths: no data is
read), and one read task per output partition gathers its pieces. DataFrame shards stored as
Arrow move as zero-copy row ranges; other shards are cut once by a first round of tasks, which
the driver then addresses piece by piece.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.engine.xshards.encoding import (
    ARRAYS,
    DATAFRAME,
    DATASET,
    DICT,
    FRAME,
    OBJECTS,
    BlockInfo,
    decode,
    decode_objects,
    encode,
    encode_objects,
    info_from_metadata,
    info_of,
    is_dataframe,
    short_type,
    table_to_frame,
    with_metadata,
)
from shardflow.engine.xshards.errors import XShardsTypeError, XShardsValueError
from shardflow.engine.xshards.execution import (
    DeferredSource,
    TaskListSource,
    block_infos,
    block_metadata,
    blocks_task,
    materialize,
    partitions_of,
    source_dataset,
)
from shardflow.engine.xshards.stages import KeepStage, MapShards, element_types
from shardflow.sdk.datasource import ReadTask

OFFSETS_KEY = b"shardflow.xshards.offsets"
MERGEABLE = {DATAFRAME, "builtins.list", "numpy.ndarray", "builtins.dict"}

# A part of an output partition: ("rows", k, start, length) is a row range of block k, which
# is one DataFrame; ("element", k, row) is element ``row`` of objects block k; ("all", k) is
# every element of block k.
Part = tuple[Any, ...]


def _deferred(name: str, planner: Any) -> Any:
    return source_dataset(DeferredSource(name, planner))._with(MapShards(KeepStage(name)))


# -- repartition --------------------------------------------------------------------------


def repartition(base: Any, num: int) -> Any:
    """The partitions of the Dataset ``base`` cut into ``num`` partitions (a Dataset)."""
    return _deferred("Repartition", lambda: _plan_repartition(base, num))


def _plan_repartition(base: Any, num: int) -> list[ReadTask]:
    refs, metas = partitions_of(base)
    infos = block_infos(refs, metas)
    family = element_types([(i, info.types) for i, info in enumerate(infos)], "repartition")
    if family is None:
        return [blocks_task(_merge, [], ([], None)) for _ in range(num)]
    mergeable = family in MERGEABLE and all(
        length is not None for info in infos for length in info.lens
    )
    if mergeable:
        return _plan_record_cut(refs, infos, num, family)
    return _plan_element_cut(refs, infos, num)


def balanced_bounds(total: int, num: int) -> np.ndarray:
    sizes = np.full(num, total // num, dtype=np.int64)
    sizes[: total % num] += 1
    return np.concatenate([[0], np.cumsum(sizes)])


def _plan_element_cut(refs: list[Any], infos: list[BlockInfo], num: int) -> list[ReadTask]:
    """Whole elements, in order, spread evenly over ``num`` partitions."""
    located = [(k, row) for k, info in enumerate(infos) for row in range(info.count)]
    bounds = balanced_bounds(len(located), num)
    tasks = []
    for j in range(num):
        parts = []
        for k, row in located[bounds[j] : bounds[j + 1]]:
            parts.append(("element", k, row) if infos[k].kind == OBJECTS else ("all", k))
        tasks.append(_gather_task(refs, parts, None))
    return tasks


def _plan_record_cut(
    refs: list[Any], infos: list[BlockInfo], num: int, family: str
) -> list[ReadTask]:
    """Rows (items) of all elements, in order, cut into ``num`` equal runs."""
    total = sum(length for info in infos for length in info.lens)
    bounds = balanced_bounds(total, num)
    parts: list[list[Part]] = [[] for _ in range(num)]
    cut_specs: dict[int, list[tuple]] = {}  # objects block -> pieces (row, start, stop, dest)
    offset = 0
    for k, info in enumerate(infos):
        for row, length in enumerate(info.lens):
            start, end = offset, offset + length
            while start < end:
                dest = min(int(np.searchsorted(bounds, start, side="right")) - 1, num - 1)
                stop = min(end, int(bounds[dest + 1]))
                if info.kind != OBJECTS:
                    parts[dest].append(("rows", k, start - offset, stop - start))
                elif start == offset and stop == end:
                    parts[dest].append(("element", k, row))
                else:
                    cut_specs.setdefault(k, []).append((row, start - offset, stop - offset, dest))
                start = stop
            offset = end
    refs = list(refs)
    if cut_specs:
        # One task per block with elements to cut: its output holds the pieces, one per row.
        keys = sorted(cut_specs)
        tasks = [blocks_task(_cut_pieces, [refs[k]], (cut_specs[k],)) for k in keys]
        piece_refs, _ = materialize(_run_tasks("RepartitionCut", tasks))
        for key, piece_ref in zip(keys, piece_refs):
            index = len(refs)
            refs.append(piece_ref)
            for row, (_, _, _, dest) in enumerate(cut_specs[key]):
                parts[dest].append(("element", index, row, "piece"))
        # Pieces were appended after whole parts; restore the order of the data.
        order = _part_order(infos, cut_specs, keys)
        parts = [sorted(p, key=order) for p in parts]
    return [_gather_task(refs, p, family) for p in parts]


def _part_order(infos: list[BlockInfo], cut_specs: dict[int, list[tuple]], keys: list[int]) -> Any:
    """Sort key putting the parts of an output partition back in the order of the data."""
    piece_source = {}
    base = len(infos)
    for n, key in enumerate(keys):
        for row, (element, start, _, _) in enumerate(cut_specs[key]):
            piece_source[(base + n, row)] = (key, element, start)

    def order(part: Part) -> tuple:
        if len(part) == 4 and part[0] == "element":
            return piece_source[(part[1], part[2])]
        if part[0] == "rows":
            return (part[1], 0, part[2])
        return (part[1], part[2], 0)

    return order


def _cut_pieces(blocks: list[pa.Table], spec: list[tuple]) -> pa.Table:
    elements = decode(blocks[0])
    return encode([slice_element(elements[row], start, stop) for row, start, stop, _ in spec])


def slice_element(element: Any, start: int, stop: int) -> Any:
    """Items ``start:stop`` of a DataFrame (a fresh index where it had the default one), a
    dict of ndarrays, a list or an ndarray."""
    if is_dataframe(element):
        piece = element.iloc[start:stop]
        return piece.reset_index(drop=True) if _default_index(element) else piece
    if isinstance(element, dict):
        return {key: value[start:stop] for key, value in element.items()}
    return element[start:stop]


def _run_tasks(name: str, tasks: list[ReadTask]) -> Any:
    return source_dataset(TaskListSource(name, tasks))._with(MapShards(KeepStage(name)))


def _gather_task(refs: Sequence[Any], parts: list[Part], family: str | None) -> ReadTask:
    """A task building one output partition from ``parts`` of the blocks ``refs``."""
    used = sorted({part[1] for part in parts})
    position = {k: i for i, k in enumerate(used)}
    local = [(part[0], position[part[1]], *part[2:]) for part in parts]
    return blocks_task(_merge, [refs[k] for k in used], (local, family))


def _merge(blocks: list[pa.Table], parts: list[Part], family: str | None) -> pa.Table:
    """One partition from ``parts``: pieces of one type concatenated into one element
    (``family`` set), or elements kept whole (``family`` None)."""
    if family in (DATAFRAME, DICT) and parts and all(p[0] == "rows" for p in parts):
        kind = FRAME if family == DATAFRAME else ARRAYS
        slices = [blocks[p[1]].slice(p[2], p[3]) for p in parts]
        slices = [s for s in slices if s.num_rows]
        same = all(s.schema.equals(slices[0].schema, check_metadata=False) for s in slices)
        if slices and same and all(info_of(s).kind in (kind, DATASET) for s in slices):
            table = pa.concat_tables(slices) if len(slices) > 1 else slices[0]
            return with_metadata(table, BlockInfo(kind, [family], [table.num_rows], [None]))
    decoded: dict[int, list[Any]] = {}

    def elements_of(k: int) -> list[Any]:
        if k not in decoded:
            decoded[k] = decode(blocks[k])
        return decoded[k]

    items: list[Any] = []
    for part in parts:
        if part[0] == "rows":
            items.append(decode(blocks[part[1]].slice(part[2], part[3]))[0])
        elif part[0] == "element":
            items.append(elements_of(part[1])[part[2]])
        else:
            items.extend(elements_of(part[1]))
    if family is None:
        return encode(items)
    items = [item for item in items if item_length(item)]
    return encode([concat_items(items, family)] if items else [])


def item_length(item: Any) -> int:
    if isinstance(item, dict):
        return len(next(iter(item.values()))) if item else 0
    return len(item)


def _default_index(df: Any) -> bool:
    import pandas as pd

    index = df.index
    return (
        isinstance(index, pd.RangeIndex)
        and index.start == 0
        and index.step == 1
        and index.name is None
    )


def concat_items(items: list[Any], family: str) -> Any:
    if family == DATAFRAME:
        import pandas as pd

        if len(items) == 1:
            return items[0]
        fresh = all(_default_index(df) for df in items)
        return pd.concat(items, ignore_index=fresh)
    if family == "builtins.list":
        return [x for item in items for x in item]
    if family == "numpy.ndarray":
        return np.concatenate(items, axis=0)
    keys = list(items[0])
    for item in items[1:]:
        if list(item) != keys:
            raise XShardsValueError(
                f"repartition: dict shards must have the same keys; found {keys} and {list(item)}."
            )
    return {key: np.concatenate([item[key] for item in items], axis=0) for key in keys}


# -- partition_by -------------------------------------------------------------------------


def partition_by(base: Any, cols: list[str], num: int) -> Any:
    """The rows of the DataFrame partitions of ``base`` grouped by ``cols`` (a Dataset)."""
    return _deferred("PartitionBy", lambda: _plan_partition_by(base, cols, num))


def _plan_partition_by(base: Any, cols: list[str], num: int) -> list[ReadTask]:
    refs, metas = partitions_of(base)
    infos = block_infos(refs, metas)
    family = element_types([(i, info.types) for i, info in enumerate(infos)], "partition_by")
    if family is None:
        return [blocks_task(_merge, [], ([], DATAFRAME)) for _ in range(num)]
    if family != DATAFRAME:
        raise XShardsTypeError(
            "Currently only support partition by for XShards of Pandas DataFrame: "
            f"partition_by applies to XShards of pandas DataFrames; these shards hold "
            f"{short_type(family)}."
        )
    tasks = [
        blocks_task(_hash_split, [ref], (cols, num)) for ref, info in zip(refs, infos) if info.count
    ]
    split_refs, split_metas = materialize(_run_tasks("PartitionByHash", tasks))
    parts: list[list[Part]] = [[] for _ in range(num)]
    for k, (metadata, meta) in enumerate(zip(block_metadata(split_refs), split_metas)):
        offsets = json.loads(metadata[OFFSETS_KEY])
        info = info_from_metadata(metadata, meta.num_rows or 0)
        for j in range(num):
            if info.kind == OBJECTS:
                if info.types[j] == DATAFRAME:
                    parts[j].append(("element", k, j))
            elif offsets[j + 1] > offsets[j]:
                parts[j].append(("rows", k, offsets[j], offsets[j + 1] - offsets[j]))
    return [_gather_task(split_refs, p, DATAFRAME) for p in parts]


def _check_columns(cols: list[str], columns: list[Any]) -> None:
    missing = [c for c in cols if c not in columns]
    if missing:
        raise XShardsValueError(
            f"The partition column is not in the DataFrame: column(s) {missing} are not in "
            f"the DataFrame; its columns are {list(columns)}."
        )


def hash_destinations(df: Any, cols: list[str], num: int) -> np.ndarray:
    # From the submodule, not ``pd.util``: a worker whose first import of pandas was cut
    # short (a task cancelled mid-import) keeps pandas.util loaded but not bound on pandas.
    from pandas.util import hash_pandas_object

    _check_columns(cols, list(df.columns))
    hashes = hash_pandas_object(df[cols], index=False).to_numpy()
    return (hashes % np.uint64(num)).astype(np.int64)


def _hash_split(blocks: list[pa.Table], cols: list[str], num: int) -> pa.Table:
    """A partition's rows grouped by destination partition, with each group's row range
    (Arrow blocks), or one row per destination holding its rows (pickled DataFrames)."""
    block = blocks[0]
    info = info_from_metadata(block.schema.metadata, block.num_rows)
    if info.kind != OBJECTS:
        columns = [c for c in block.column_names if not c.startswith("__index_level_")]
        _check_columns(cols, columns)
        dest = hash_destinations(table_to_frame(block.select(cols)), cols, num)
        order = np.argsort(dest, kind="stable")
        table = block.take(pa.array(order)) if len(order) else block
        offsets = np.concatenate([[0], np.cumsum(np.bincount(dest, minlength=num))]).tolist()
        out = with_metadata(table, BlockInfo(FRAME, [DATAFRAME], [table.num_rows], [None]))
    else:
        import pandas as pd

        groups: list[list[Any]] = [[] for _ in range(num)]
        for df in decode_objects(block):
            dest = hash_destinations(df, cols, num)
            for j in range(num):
                rows = df[dest == j]
                if len(rows):
                    groups[j].append(rows)
        merged = [pd.concat(g) if len(g) > 1 else (g[0] if g else None) for g in groups]
        out = encode_objects(merged)  # one row per destination, even for one DataFrame
        offsets = list(range(num + 1))
    metadata = dict(out.schema.metadata or {})
    metadata[OFFSETS_KEY] = json.dumps(offsets).encode()
    return out.replace_schema_metadata(metadata)


# -- zip ----------------------------------------------------------------------------------


def zip_shards(left: Any, right: Any) -> Any:
    """The partitions of the Datasets ``left`` and ``right`` paired shard by shard."""
    return _deferred("Zip", lambda: _plan_zip(left, right))


def _plan_zip(left: Any, right: Any) -> list[ReadTask]:
    left_refs, left_metas = partitions_of(left)
    right_refs, right_metas = partitions_of(right)
    check_zip_counts(
        [i.count for i in block_infos(left_refs, left_metas)],
        [i.count for i in block_infos(right_refs, right_metas)],
    )
    return [blocks_task(_zip_blocks, [a, b]) for a, b in zip(left_refs, right_refs)]


def check_zip_counts(left: list[int], right: list[int]) -> None:
    """Orca's checks of two XShards to zip, from their shard counts per partition."""
    if len(left) != len(right):
        raise XShardsValueError(
            "The two SparkXShards should have the same number of partitions; they have "
            f"{len(left)} and {len(right)}."
        )
    for index, (a, b) in enumerate(zip(left, right)):
        if a != b:
            raise XShardsValueError(
                "The two SparkXShards should have the same number of elements in each "
                f"partition; partition {index} has {a} and {b}."
            )


def _zip_blocks(blocks: list[pa.Table]) -> pa.Table:
    return encode(list(zip(decode(blocks[0]), decode(blocks[1]))))
