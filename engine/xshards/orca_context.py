"""Orca's context functions, so Orca scripts start and stop shardflow unchanged but for
their imports: ``init_orca_context`` chooses where XShards run (shardflow's local backend,
Ray, or Spark), ``stop_orca_context`` ends what it started.
"""

from __future__ import annotations

from typing import Any

from shardflow.sdk.optional import require


class OrcaContext:
    """Orca's global settings. Only ``pandas_read_backend`` is read: files are always read
    with pandas (or pyarrow for Parquet), as Orca's ``"pandas"`` backend does.
    ``_eager_mode = True`` computes every XShards when it is made, as Orca's eager mode."""

    pandas_read_backend = "pandas"
    log_output = False
    _eager_mode = False


_started_ray = False
_SPARK_MODES = ("spark-submit", "standalone", "yarn-client", "yarn-cluster", "k8s-client")
_MASTER_PREFIXES = ("spark://", "yarn", "k8s://", "local[", "mesos://")


def init_orca_context(
    cluster_mode: str = "local",
    cores: int | str | None = None,
    memory: str | None = None,
    num_nodes: int = 1,
    init_ray_on_spark: bool = False,
    runtime: str = "spark",
    address: str | None = None,
    backend: str | None = None,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    **kwargs: Any,
) -> Any:
    """Start shardflow as Orca would start its context.

    Args:
        cluster_mode: ``"local"`` (this machine), ``"ray"`` / ``"ray-client"`` (join a Ray
            cluster at ``address``), ``"spark-submit"`` (join the SparkContext that
            ``spark-submit`` set up), ``"standalone"`` / ``"yarn-client"`` / ... (Spark with
            ``master``), or a Spark master URL (``"spark://host:7077"``, ``"local[4]"``).
        cores: CPUs to use (``"*"`` or None for all).
        memory: Spark's ``spark.executor.memory`` on Spark; ignored elsewhere.
        num_nodes: Ignored; the cluster decides.
        init_ray_on_spark: Start a local Ray as well (on Spark: for ``to_ray()``), or run
            on Ray when XShards do not run on Spark.
        runtime: ``"ray"`` for the Ray backend; ``"spark"`` (Orca's default) runs on
            shardflow's local backend unless ``backend="spark"``.
        address: A Ray cluster's address, for ``cluster_mode="ray"``.
        backend: ``"spark"`` runs XShards on Spark (``pip install 'shardflow[spark]'``);
            ``"local"`` or ``"ray"`` choose shardflow's backend. Spark cluster modes imply
            ``"spark"``.
        master: The Spark master URL for ``"standalone"`` and YARN / Kubernetes modes.
        conf: More Spark settings for a SparkSession started here.
        kwargs: Other Orca options, ignored.

    Returns:
        The SparkContext when XShards run on Spark, else None.
    """
    global _started_ray
    import shardflow as sf

    num_cpus = None if cores in (None, "*") else int(cores)
    spark_master = _spark_master(cluster_mode, master, num_cpus)
    if backend == "spark" or spark_master is not None:
        from shardflow.engine.xshards.spark.session import use_spark

        settings = dict(conf or {})
        if memory is not None:
            settings.setdefault("spark.executor.memory", str(memory))
        session = use_spark(spark_master, num_cpus, settings)
        if init_ray_on_spark or runtime == "ray":
            _start_local_ray(num_cpus)
        return session.sparkContext
    if backend not in (None, "local", "ray"):
        raise ValueError(f"backend must be 'local', 'ray' or 'spark', got {backend!r}.")
    if cluster_mode in ("ray", "ray-client"):
        sf.init(backend="ray", address=address or "auto")
        return None
    if cluster_mode != "local":
        raise ValueError(
            f"Unknown cluster_mode={cluster_mode!r}: use 'local', 'ray', 'ray-client', "
            f"one of {list(_SPARK_MODES)} or a Spark master URL."
        )
    if backend == "ray" or runtime == "ray" or init_ray_on_spark:
        _start_local_ray(num_cpus)
        return None
    sf.init(backend="local")
    sf.DataContext.get_current().num_cpus = num_cpus
    return None


def _spark_master(cluster_mode: str, master: str | None, num_cpus: int | None) -> Any:
    """The master URL a Spark cluster mode asks for; "" to take spark-submit's; None when
    ``cluster_mode`` is not a Spark one."""
    if cluster_mode == "spark-submit":
        return ""
    if cluster_mode in _SPARK_MODES:
        if master:
            return master
        if cluster_mode.startswith("yarn"):
            return "yarn"
        raise ValueError(
            f"cluster_mode={cluster_mode!r} needs master= (a Spark master URL such as "
            "'spark://host:7077' or 'k8s://https://host:443')."
        )
    if cluster_mode.startswith(_MASTER_PREFIXES):
        return cluster_mode
    return None


def _start_local_ray(num_cpus: int | None) -> None:
    global _started_ray
    import shardflow as sf

    ray = require("ray", "ray", "init_orca_context on Ray")
    _started_ray = _started_ray or not ray.is_initialized()
    options = {} if num_cpus is None else {"num_cpus": num_cpus}
    sf.init(backend="ray", **options)


def stop_orca_context() -> None:
    """Go back to the local backend; stop the SparkSession and shut down Ray if
    ``init_orca_context`` started them."""
    global _started_ray
    import shardflow as sf
    from shardflow.engine.xshards.spark.session import leave_spark

    leave_spark()
    if _started_ray:
        ray = require("ray", "ray", "init_orca_context on Ray")

        ray.shutdown()
        _started_ray = False
    sf.init(backend="local")
