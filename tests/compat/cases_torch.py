"""Differential cases: torch batches of null and non-numeric columns, ``collate_fn``'s
classes."""

from __future__ import annotations

from harness import Raised, case, exception_kind, submodule


def _tensors(batch):
    return {name: (str(t.dtype), t.tolist()) for name, t in sorted(batch.items())}


def _first_batch_or_raised(ds, **kwargs):
    try:
        return _tensors(next(iter(ds.iter_torch_batches(batch_size=4, **kwargs))))
    except Exception as exc:
        return Raised(exception_kind(exc))


@case("Dataset.iter_torch_batches", requires=("torch",), note="columns of nulls only")
def torch_batches_of_null_columns(m, tmp):
    """a column of nulls only is float32 NaNs beside the other columns' tensors"""
    ds = m.from_items([{"a": None, "b": 1}, {"a": None, "b": 2}], override_num_blocks=1)
    batch = next(iter(ds.iter_torch_batches(batch_size=4)))
    return [str(batch["a"].dtype), batch["a"].isnan().tolist(), _tensors({"b": batch["b"]})]


@case(
    "Dataset.iter_torch_batches",
    requires=("torch",),
    note="columns that cannot become tensors raise Ray Data's exception types",
)
def torch_batches_of_object_columns(m, tmp):
    """strings (TypeError), strings with a null, dicts and ragged lists (RuntimeError)"""
    columns = [
        [{"s": "a"}, {"s": "b"}],
        [{"s": "a"}, {"s": None}],
        [{"d": {"k": 1}}],
        [{"l": [1]}, {"l": [1, 2]}],
    ]
    return [_first_batch_or_raised(m.from_items(rows, override_num_blocks=1)) for rows in columns]


@case(
    "collate_fn.DefaultCollateFn",
    "collate_fn.ArrowBatchCollateFn",
    "collate_fn.NumpyBatchCollateFn",
    "collate_fn.PandasBatchCollateFn",
    requires=("torch",),
    note="collate functions by batch format",
)
def collate_functions(m, tmp):
    """DefaultCollateFn with and without dtypes; Arrow, NumPy and pandas collate subclasses"""
    import torch

    collate = submodule(m, "collate_fn")

    class SumArrow(collate.ArrowBatchCollateFn):
        def __call__(self, batch):
            return torch.as_tensor(batch.column("id").to_numpy()).sum()

    class SumNumpy(collate.NumpyBatchCollateFn):
        def __call__(self, batch):
            return torch.as_tensor(batch["id"]).sum()

    class SumPandas(collate.PandasBatchCollateFn):
        def __call__(self, batch):
            return torch.as_tensor(batch["id"].to_numpy()).sum()

    ds = m.range(6, override_num_blocks=1)
    out = [
        [
            _tensors(b)
            for b in ds.iter_torch_batches(batch_size=4, collate_fn=collate.DefaultCollateFn())
        ],
        [
            _tensors(b)
            for b in ds.iter_torch_batches(
                batch_size=4, collate_fn=collate.DefaultCollateFn(dtypes=torch.float32)
            )
        ],
    ]
    for fn in (SumArrow(), SumNumpy(), SumPandas()):
        out.append([int(t) for t in ds.iter_torch_batches(batch_size=4, collate_fn=fn)])
    return out
