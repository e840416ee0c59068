"""The public names: shardflow.xshards, sf.XShards and Orca's module layout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap


def test_orca_layout():
    import shardflow as sf
    import shardflow.orca.data.pandas
    from shardflow.orca.data import RayXShards, SharedValue, SparkXShards, XShards
    from shardflow.orca.data.pandas.preprocessing import read_json
    from shardflow.orca.data.shard import XShards as ShardXShards
    from shardflow.xshards import XShards as PublicXShards

    assert XShards is sf.XShards is PublicXShards is ShardXShards is SparkXShards
    assert shardflow.orca.data.pandas.read_csv is sf.xshards.read_csv
    assert read_json is sf.xshards.read_json
    assert SharedValue is sf.xshards.SharedValue and RayXShards is sf.xshards.RayXShards
    assert sf.orca.data.XShards is XShards


def test_imports_stay_light():
    code = textwrap.dedent(
        """
        import json, sys
        import shardflow
        light = "ray" not in sys.modules and "pandas" not in sys.modules
        import shardflow.orca.data.pandas
        print(json.dumps({"light": light, "ray": "ray" in sys.modules}))
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"light": True, "ray": False}


def test_orca_context_chooses_the_backend(fresh_context, ray_session):
    import numpy as np

    import shardflow as sf
    from shardflow.orca import init_orca_context, stop_orca_context

    init_orca_context(cluster_mode="local", cores=2)
    assert sf.DataContext.get_current().backend == "local"
    assert sf.DataContext.get_current().num_cpus == 2
    assert len(sf.XShards.partition(np.arange(4)).collect()) == 2
    init_orca_context(cluster_mode="local", runtime="ray")  # Ray already runs: joined
    assert sf.DataContext.get_current().backend == "ray"
    stop_orca_context()  # does not stop a Ray it did not start
    assert sf.DataContext.get_current().backend == "local" and ray_session.is_initialized()
    try:
        init_orca_context(cluster_mode="mesos-cluster")
    except ValueError as exc:
        assert "Unknown cluster_mode" in str(exc) and "spark-submit" in str(exc)
    else:
        raise AssertionError("an unknown cluster mode is refused")
