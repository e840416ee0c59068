"""Differential cases: actor pools, compute strategies, resources, async functions, tensors."""

from __future__ import annotations

import asyncio

from harness import Raised, case, exception_kind


def _raises(fn):
    try:
        fn()
    except Exception as exc:
        return Raised(exception_kind(exc))
    return "no error"


class AddConstant:
    def __init__(self, constant):
        self.constant = constant

    def __call__(self, batch):
        return {"id": batch["id"] + self.constant}


class AsyncDouble:
    async def __call__(self, batch):
        await asyncio.sleep(0.01)
        return {"id": batch["id"] * 2}


def double(batch):
    return {"id": batch["id"] * 2}


@case("Dataset.map_batches", "Dataset.map", "ActorPoolStrategy", "TaskPoolStrategy", slow=True)
def actor_pools_and_task_limits(m, tmp):
    """callable classes in actor pools, concurrency and compute for functions and classes"""
    ds = m.range(12, override_num_blocks=3)
    # One actor asking for half a CPU: Ray Data hangs when actors take every CPU.
    one = {"concurrency": 1, "num_cpus": 0.5}
    results = [
        ds.map_batches(AddConstant, fn_constructor_args=(10,), batch_size=4, **one).take_all(),
        ds.map_batches(double, concurrency=2)
        .map(lambda r: {"v": r["id"]}, concurrency=1)
        .take_all(),
        ds.map_batches(
            AsyncDouble, compute=m.ActorPoolStrategy(size=1), batch_size=5, num_cpus=0.5
        ).take_all(),
    ]
    # Ray Data keeps no order here (preserve_order is off), and on a busy machine its blocks
    # come as they finish: the rows are compared, not their order.
    return [sorted(rows, key=lambda row: tuple(row.values())) for rows in results]


@case("Dataset.map_batches", "Dataset.filter", "Dataset.flat_map")
def invalid_compute_arguments(m, tmp):
    """invalid pool sizes and strategies raise ValueError when the method is called"""
    ds = m.range(3)
    return [
        _raises(lambda: ds.map_batches(AddConstant, concurrency=(2, 1))),
        _raises(lambda: ds.map_batches(AddConstant, concurrency=(0, 2))),
        _raises(lambda: ds.map_batches(AddConstant, concurrency=(1, 2, 3))),
        _raises(lambda: ds.map_batches(AddConstant, compute=m.TaskPoolStrategy())),
        _raises(lambda: ds.map_batches(double, concurrency=(1, 2))),
        _raises(lambda: ds.map_batches(double, compute=m.ActorPoolStrategy(size=1))),
        _raises(lambda: ds.map_batches(double, fn_constructor_args=(1,))),
        _raises(lambda: ds.map_batches(double, concurrency=0)),
        _raises(lambda: ds.map_batches(double, concurrency="2")),
        _raises(lambda: ds.map_batches(double, num_gpus=1)),
        _raises(lambda: ds.filter(lambda r: True, concurrency=(1, 2))),
        _raises(lambda: ds.flat_map(lambda r: [r], concurrency=(1, 2))),
        _raises(lambda: m.ActorPoolStrategy(size=2, min_size=1)),
        _raises(lambda: m.ActorPoolStrategy(min_size=3, max_size=2)),
        _raises(lambda: m.TaskPoolStrategy(size=0)),
    ]


@case("range_tensor")
def range_tensor_rows_and_batches(m, tmp):
    """range_tensor: row i is a tensor of the shape filled with i"""
    ds = m.range_tensor(6, shape=(2, 3), override_num_blocks=2)
    return [
        ds.count(),
        ds.take_batch(6)["data"],
        [r["data"] for r in m.range_tensor(3).take_all()],
        ds.map_batches(lambda b: {"data": b["data"] * 2}).take(2),
    ]


@case("from_torch", requires=("torch",))
def from_torch_items(m, tmp):
    """from_torch: one row per item in column item, map-style and iterable datasets"""
    import torch

    data = torch.utils.data.TensorDataset(torch.arange(6.0).reshape(3, 2), torch.tensor([0, 1, 2]))
    rows = m.from_torch(data).take_all()

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(40))

    return [
        [(r["item"][0].tolist(), int(r["item"][1])) for r in rows],
        m.from_torch(Stream()).take(3),
        m.from_torch(Stream()).count(),
    ]
