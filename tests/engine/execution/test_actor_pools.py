"""Actor pools on both backends: construction once per actor, pool bounds, autoscaling, GPU
assignment, task limits of functions, and async functions.

Actors are other processes, so what they did is recorded in files under ``tmp_path``; every
result is checked against NumPy.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import numpy as np
import pytest

import shardflow as sf

pytestmark = pytest.mark.timeout(120)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _records(folder, prefix):
    return [name.split("-", 1)[1] for name in os.listdir(folder) if name.startswith(prefix + "-")]


class Scale:
    """Records each construction in a file named after its process."""

    def __init__(self, folder, factor=1):
        self.factor = factor
        self.pid = os.getpid()
        open(os.path.join(folder, f"init-{self.pid}-{uuid.uuid4().hex}"), "w").close()

    def __call__(self, batch):
        return {
            "id": batch["id"],
            "out": batch["id"] * self.factor,
            "pid": np.full(len(batch["id"]), self.pid),
        }


class SlowScale(Scale):
    """Scale taking ``delay`` seconds per batch, recording when each batch ran."""

    def __init__(self, folder, delay):
        super().__init__(folder)
        self.folder = folder
        self.delay = delay

    def __call__(self, batch):
        start = time.time()
        time.sleep(self.delay)
        with open(os.path.join(self.folder, f"span-{uuid.uuid4().hex}"), "w") as f:
            f.write(f"{start} {time.time()} {self.pid}")
        return super().__call__(batch)


def _spans(folder):
    spans = []
    for name in os.listdir(folder):
        if name.startswith("span-"):
            with open(os.path.join(folder, name)) as f:
                start, end, pid = f.read().split()
            spans.append((float(start), float(end), int(pid)))
    return spans


def _max_overlap(spans):
    events = sorted([(s, 1) for s, _, _ in spans] + [(e, -1) for _, e, _ in spans])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def test_constructor_runs_once_per_actor(backend, tmp_path):
    ds = sf.range(60, override_num_blocks=6).map_batches(
        Scale,
        fn_constructor_args=(str(tmp_path),),
        fn_constructor_kwargs={"factor": 3},
        concurrency=2,
        batch_size=5,
    )
    out = ds.take_batch(60)
    np.testing.assert_array_equal(out["id"], np.arange(60))
    np.testing.assert_array_equal(out["out"], np.arange(60) * 3)
    inits = _records(tmp_path, "init")
    assert len(inits) <= 2  # one construction per actor, never one per batch
    assert {int(p.split("-")[0]) for p in inits} >= set(out["pid"].tolist())
    assert os.getpid() not in set(out["pid"].tolist())  # the driver constructed nothing


def test_pool_bounds_are_held(backend, tmp_path):
    ds = sf.range(24, override_num_blocks=12).map_batches(
        SlowScale,
        fn_constructor_args=(str(tmp_path), 0.1),
        concurrency=(1, 2),
        compute=None,
    )
    out = ds.take_batch(24)
    np.testing.assert_array_equal(np.sort(out["id"]), np.arange(24))
    assert 1 <= len(_records(tmp_path, "init")) <= 2
    assert _max_overlap(_spans(tmp_path)) <= 2


def test_function_concurrency_limits_parallel_tasks(backend, tmp_path):
    folder = str(tmp_path)

    def slow(batch):
        start = time.time()
        time.sleep(0.1)
        with open(os.path.join(folder, f"span-{uuid.uuid4().hex}"), "w") as f:
            f.write(f"{start} {time.time()} 0")
        return {"id": batch["id"] + 1}

    out = sf.range(16, override_num_blocks=8).map_batches(slow, concurrency=1).take_batch(16)
    np.testing.assert_array_equal(out["id"], np.arange(16) + 1)
    spans = _spans(tmp_path)
    assert len(spans) == 8 and _max_overlap(spans) == 1


class Phased:
    """Slow model whose output says how many actors of the pool were alive at each call."""

    def __init__(self, folder):
        self.folder = folder
        open(os.path.join(folder, f"init-{os.getpid()}"), "w").close()

    def __call__(self, batch):
        time.sleep(0.3)
        pids = [int(n.split("-")[1]) for n in os.listdir(self.folder) if n.startswith("init-")]
        alive = sum(_alive(p) for p in pids)
        open(os.path.join(self.folder, f"done-{batch['id'][0]}"), "w").close()
        return {"id": batch["id"], "alive": np.full(len(batch["id"]), alive)}


BURST = 12


def paced(batch, folder):
    """Upstream: a burst of BURST blocks at once; then each later block only once the model
    has finished every earlier one, and after a pause longer than the idle timeout."""
    first = int(batch["id"][0])
    if first >= BURST:
        deadline = time.monotonic() + 60
        while not all(os.path.exists(os.path.join(folder, f"done-{i}")) for i in range(first)):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(1.0)
    return batch


def test_autoscaling_grows_with_queued_work_then_shrinks_when_idle(
    backend, tmp_path, fresh_context
):
    fresh_context.actor_pool_idle_timeout_s = 0.2
    ds = (
        sf.range(BURST + 2, override_num_blocks=BURST + 2)
        .map_batches(paced, fn_kwargs={"folder": str(tmp_path)}, concurrency=1)
        # A quarter CPU each: on Ray, actors together keep one of the two CPUs for tasks.
        .map_batches(
            Phased, fn_constructor_args=(str(tmp_path),), concurrency=(1, 3), num_cpus=0.25
        )
    )
    out = ds.take_batch(BURST + 2)
    np.testing.assert_array_equal(out["id"], np.arange(BURST + 2))
    assert len(_records(tmp_path, "init")) == 3  # grew to the maximum while work queued
    assert out["alive"][:BURST].max() >= 2
    assert out["alive"][-1] == 1  # idle actors were stopped down to min_size
    assert "3 actors started (at most 3 at once)" in ds.stats()


def test_gpus_are_assigned_through_cuda_visible_devices(backend, tmp_path):
    if backend == "local":
        sf.init(num_gpus=2)

    class Device:
        def __init__(self):
            self.devices = os.environ.get("CUDA_VISIBLE_DEVICES")

        def __call__(self, batch):
            time.sleep(0.25)
            return {
                "id": batch["id"],
                "pid": np.full(len(batch["id"]), os.getpid()),
                "devices": [self.devices] * len(batch["id"]),
            }

    out = (
        sf.range(24, override_num_blocks=12)
        .map_batches(
            Device,
            compute=sf.ActorPoolStrategy(size=2, max_tasks_in_flight_per_actor=1),
            num_gpus=1,
            batch_size=2,
        )
        .take_all()
    )
    assert [r["id"] for r in out] == list(range(24))
    devices_of = {}
    for row in out:
        devices_of.setdefault(row["pid"], set()).add(row["devices"])
    # Each actor sees exactly one device of its own.
    assert sorted(d for seen in devices_of.values() for d in seen) == ["0", "1"]


def test_fractional_gpus_share_devices(backend, tmp_path):
    if backend == "local":
        sf.init(num_gpus=2)
    ds = sf.range(8, override_num_blocks=4).map_batches(
        Scale, fn_constructor_args=(str(tmp_path),), concurrency=4, num_gpus=0.5, batch_size=2
    )
    np.testing.assert_array_equal(ds.take_batch(8)["out"], np.arange(8))
    assert "4 actors started (at most 4 at once)" in ds.stats()  # four actors on two devices


def test_asking_for_more_gpus_than_exist_fails_fast(backend, tmp_path):
    if backend == "local":
        sf.init(num_gpus=2)
    with pytest.raises(ValueError, match=r"3 actor\(s\) with num_gpus=1 each.*2 GPU"):
        sf.range(4).map_batches(
            Scale, fn_constructor_args=(str(tmp_path),), concurrency=3, num_gpus=1, batch_size=2
        ).take_all()
    assert not _records(tmp_path, "init")  # failed before starting any actor


def test_local_gpu_function_runs_on_its_own_device(tmp_path):
    sf.init(num_gpus=2)

    def where(batch):
        return {"devices": [os.environ.get("CUDA_VISIBLE_DEVICES")] * len(batch["id"])}

    out = sf.range(8, override_num_blocks=4).map_batches(where, num_gpus=1, batch_size=2)
    assert set(out.take_batch(8)["devices"].tolist()) <= {"0", "1"}


def test_undeclared_gpus_fail_clearly_without_devices(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ValueError, match="sf.init\\(num_gpus=n\\)"):
        sf.range(4).map_batches(
            Scale, fn_constructor_args=(str(tmp_path),), concurrency=1, num_gpus=1, batch_size=2
        ).take_all()


class AsyncModel:
    def __init__(self, folder):
        open(os.path.join(folder, f"init-{os.getpid()}-{uuid.uuid4().hex}"), "w").close()

    async def __call__(self, batch):
        await asyncio.sleep(0.2)
        return {"id": batch["id"] * 2}


class AsyncGenerator:
    async def __call__(self, batch):
        for part in (0, 1):
            await asyncio.sleep(0.01)
            yield {"id": batch["id"], "part": np.full(len(batch["id"]), part)}


async def async_double(batch):
    await asyncio.sleep(0.2)
    return {"id": batch["id"] * 2}


_IN_FLIGHT = [0]


async def async_double_counting(batch):
    """async_double, also reporting how many calls were in flight while it slept."""
    _IN_FLIGHT[0] += 1
    await asyncio.sleep(0.2)
    overlapping = _IN_FLIGHT[0]
    _IN_FLIGHT[0] -= 1
    return {"id": batch["id"] * 2, "in_flight": np.full(len(batch["id"]), overlapping)}


async def async_row(row):
    await asyncio.sleep(0.05)
    return {"id": row["id"] + 1}


def test_async_functions_run_batches_concurrently_in_order(backend, tmp_path):
    out = (
        sf.range(40, override_num_blocks=1)
        .map_batches(async_double_counting, batch_size=5)
        .take_batch(40)
    )
    np.testing.assert_array_equal(out["id"], np.arange(40) * 2)
    assert out["in_flight"].max() > 1  # several batches at a time, not one after another

    ds = sf.range(40, override_num_blocks=1).map_batches(
        AsyncModel, fn_constructor_args=(str(tmp_path),), batch_size=5, concurrency=1
    )
    np.testing.assert_array_equal(ds.take_batch(40)["id"], np.arange(40) * 2)
    assert len(_records(tmp_path, "init")) == 1


def test_async_generators_and_row_functions(backend):
    out = (
        sf.range(6, override_num_blocks=1)
        .map_batches(AsyncGenerator, batch_size=3, concurrency=1)
        .take_all()
    )
    expected = [{"id": i, "part": p} for lo in (0, 3) for p in (0, 1) for i in range(lo, lo + 3)]
    assert out == expected
    assert sf.range(20).map(async_row).take_batch(20)["id"].tolist() == list(range(1, 21))


def test_actor_stage_feeds_following_stages(backend, tmp_path):
    ds = (
        sf.range(30, override_num_blocks=6)
        .map_batches(Scale, fn_constructor_args=(str(tmp_path), 2), concurrency=1)
        .map(lambda row: {"v": row["out"] + 1})
        .filter(expr=sf.col("v") > 10)
    )
    assert sorted(r["v"] for r in ds.take_all()) == [2 * i + 1 for i in range(30) if 2 * i + 1 > 10]


def _operator_names(ds):
    return [
        line.split(": ")[0].split(" ", 2)[2]
        for line in ds.stats().splitlines()
        if line.startswith("Operator ")
    ]


def add_one(batch):
    return {"id": batch["id"] + 1}


def test_stages_before_a_pool_that_fills_every_slot_run_in_its_actors(tmp_path, fresh_context):
    fresh_context.num_cpus = 2
    fused = (
        sf.range(20, override_num_blocks=4)
        .map_batches(add_one)
        .map_batches(Scale, fn_constructor_args=(str(tmp_path),), concurrency=2)
    )
    assert sorted(fused.take_batch(20)["out"].tolist()) == list(range(1, 21))
    assert _operator_names(fused)[0] == "ReadRange->MapBatches(add_one)->MapBatches(Scale)"
    # A pool smaller than the machine, or one on GPUs, leaves the feeding stages in tasks.
    small = (
        sf.range(20, override_num_blocks=4)
        .map_batches(add_one)
        .map_batches(Scale, fn_constructor_args=(str(tmp_path),), concurrency=1)
    )
    assert sorted(small.take_batch(20)["out"].tolist()) == list(range(1, 21))
    assert _operator_names(small)[:2] == ["ReadRange->MapBatches(add_one)", "MapBatches(Scale)"]


def _write_images(folder, count=12):
    from PIL import Image

    folder.mkdir()
    for i in range(count):
        Image.fromarray(np.full((8, 8, 3), i * 10, dtype=np.uint8)).save(folder / f"{i:02d}.png")
    return folder


class MeanPixel:
    def __call__(self, batch):
        return {"mean": batch["image"].reshape(len(batch["image"]), -1).mean(axis=1)}


@pytest.mark.parametrize(
    "kwargs",
    [{"concurrency": 2}, {"concurrency": 1, "num_cpus": 2}],
    ids=["two-actors", "one-actor-with-every-cpu"],
)
def test_actor_pools_asking_for_every_cpu_do_not_starve_the_read(backend, tmp_path, kwargs):
    # Ray Data 2.60 hangs on this pipeline on a two-CPU machine (its issue 44687).
    if backend == "local":
        sf.DataContext.get_current().num_cpus = 2
    folder = _write_images(tmp_path / "images")
    ds = sf.read_images(folder).map_batches(MeanPixel, batch_size=4, **kwargs)
    assert sorted(ds.take_batch(12)["mean"].tolist()) == [float(i * 10) for i in range(12)]


class _SilentActor:
    """An actor that is alive but never answers its first call: what the driver sees when
    Ray loses the news that an actor it created is alive."""

    def ready(self):
        import time

        time.sleep(3600)


def test_ray_actor_that_never_answers_its_first_call_is_replaced(
    ray_session, fresh_context, monkeypatch, caplog, tmp_path
):
    from shardflow.engine.execution.backends import ray_actors

    monkeypatch.setattr(ray_actors, "_READY_POLL_S", 0.2)
    monkeypatch.setattr(ray_actors, "_LOST_READY_S", 1.0)
    created = []
    real_create = ray_actors.RayActor._create

    def create(self):
        created.append(self._spec.op_name)
        if len(created) == 1:
            return ray_session.remote(_SilentActor).options(num_cpus=0).remote()
        return real_create(self)

    monkeypatch.setattr(ray_actors.RayActor, "_create", create)
    sf.init(backend="ray")
    ds = sf.range(20, override_num_blocks=4).map_batches(
        Scale,
        fn_constructor_args=(str(tmp_path),),
        fn_constructor_kwargs={"factor": 2},
        concurrency=1,
    )
    with caplog.at_level("WARNING", logger=ray_actors.__name__):
        out = ds.take_batch(20)
    np.testing.assert_array_equal(np.sort(out["out"]), np.arange(20) * 2)
    assert len(created) == 2
    assert "did not answer its first call" in caplog.text
    assert ray_actors._control_store_state(ray_session.get_actor) is None  # not an actor
