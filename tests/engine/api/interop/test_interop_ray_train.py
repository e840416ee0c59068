"""to_ray_data / from_ray_data and Ray Train: a shardflow dataset feeds
TorchTrainer(datasets=...), whose workers read their shards with get_dataset_shard."""

from __future__ import annotations

import json
import os
import threading

import numpy as np
import pyarrow as pa
import pytest

import shardflow as sf

pytest.importorskip("ray.data")

pytestmark = pytest.mark.timeout(300)


def _dataset():
    return sf.range(60, override_num_blocks=4).map_batches(
        lambda b: {"id": b["id"], "x": b["id"].astype(np.float32) / 2, "s": b["id"].astype(str)}
    )


def test_to_ray_data_and_back(backend, ray_session):
    ds = _dataset()
    expected = ds.to_arrow()
    ray_ds = ds.to_ray_data()
    got = pa.Table.from_pylist(ray_ds.take_all())
    assert got.to_pylist() == expected.to_pylist()
    assert ray_ds.schema().base_schema.field("x").type == pa.float32()
    back = sf.from_ray_data(ray_ds.map_batches(lambda b: b, batch_format="pandas"))
    assert back.to_arrow().to_pylist() == expected.to_pylist()
    assert back.schema().base_schema.field("id").type == pa.int64()


def test_to_ray_data_keeps_blocks_in_the_object_store(ray_session):
    """On the Ray backend the ray.data.Dataset holds the blocks' own ObjectRefs."""
    import ray

    sf.init(backend="ray")
    ds = _dataset().materialize()
    ours = {ref.hex() for ref in ds.to_arrow_refs()}
    ray_ds = ds.to_ray_data()
    theirs = {entry.ref.hex() for b in ray_ds.iter_internal_ref_bundles() for entry in b.blocks}
    assert theirs == ours
    assert ray.get(ray_ds.to_arrow_refs()[0]).num_rows > 0


def test_streaming_split_shards_see_each_row_once(ray_session):
    """What Ray Train does with datasets=: split into one shard per worker, per epoch."""
    sf.init(backend="ray")
    ray_ds = _dataset().to_ray_data()
    shards = ray_ds.streaming_split(2, equal=True)
    seen: list[list[int]] = [[], []]

    def consume(i: int) -> None:
        for _epoch in range(2):
            for batch in shards[i].iter_batches(batch_size=7, batch_format="numpy"):
                seen[i].extend(int(v) for v in batch["id"])

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert sorted(seen[0] + seen[1]) == sorted(list(range(60)) * 2)


def _train_loop(config):
    import ray.train

    shard = ray.train.get_dataset_shard("train")
    rank = ray.train.get_context().get_world_rank()
    for epoch in range(2):
        ids = [int(i) for b in shard.iter_torch_batches(batch_size=8) for i in b["id"]]
        with open(os.path.join(config["out"], f"{epoch}-{rank}.json"), "w") as f:
            json.dump(ids, f)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_torch_trainer_two_workers_two_epochs(tmp_path, ray_session):
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    sf.init(backend="ray")
    out = tmp_path / "seen"
    out.mkdir()
    trainer = TorchTrainer(
        _train_loop,
        train_loop_config={"out": str(out)},
        scaling_config=ScalingConfig(num_workers=2, resources_per_worker={"CPU": 0.5}),
        datasets={"train": _dataset().drop_columns(["s"]).to_ray_data()},  # tensors only
        run_config=RunConfig(name="shardflow-train", storage_path=str(tmp_path / "runs")),
    )
    trainer.fit()
    for epoch in range(2):
        ids: list[int] = []
        for rank in range(2):
            with open(out / f"{epoch}-{rank}.json") as f:
                part = json.load(f)
            assert part, f"worker {rank} saw no rows in epoch {epoch}"
            ids += part
        assert sorted(ids) == list(range(60)), f"epoch {epoch}"


def test_ray_data_needs_a_running_ray():
    import ray

    if ray.is_initialized():
        pytest.skip("Ray is running in this process")
    with pytest.raises(RuntimeError, match="ray.init"):
        sf.range(3).to_ray_data()
