"""Orca's context functions, so Orca scripts start and stop shardflow unchanged but for
their imports: ``init_orca_context`` chooses the backend, ``stop_orca_context`` ends what it
started. There is no Spark: only local and Ray runs exist.
"""

from __future__ import annotations

from typing import Any

from shardflow.sdk.optional import require


class OrcaContext:
    """Orca's global settings. Only ``pandas_read_backend`` is read: files are always read
    with pandas (or pyarrow for Parquet), as Orca's ``"pandas"`` backend does."""

    pandas_read_backend = "pandas"
    log_output = False
    _eager_mode = False


_started_ray = False


def init_orca_context(
    cluster_mode: str = "local",
    cores: int | str | None = None,
    memory: str | None = None,
    num_nodes: int = 1,
    init_ray_on_spark: bool = False,
    runtime: str = "spark",
    address: str | None = None,
    **kwargs: Any,
) -> None:
    """Start shardflow as Orca would start its context.

    Args:
        cluster_mode: ``"local"`` (run in this process, or on a local Ray when Ray is asked
            for), or ``"ray"`` / ``"ray-client"`` to join a Ray cluster at ``address``.
        cores: CPUs to use (``"*"`` or None for all).
        memory: Ignored (Orca's Spark executor memory).
        num_nodes: Ignored; the cluster decides.
        init_ray_on_spark: Start Ray (there is no Spark to start it on): the Ray backend.
        runtime: ``"ray"`` for the Ray backend; ``"spark"`` (Orca's default) runs locally.
        address: A Ray cluster's address, for ``cluster_mode="ray"``.
        kwargs: Other Orca options, ignored.

    Returns:
        None (Orca returns a SparkContext; there is none here).
    """
    global _started_ray
    import shardflow as sf

    num_cpus = None if cores in (None, "*") else int(cores)
    if cluster_mode in ("ray", "ray-client"):
        sf.init(backend="ray", address=address or "auto")
        return None
    if cluster_mode != "local":
        raise ValueError(
            f"cluster_mode={cluster_mode!r} needs Spark, which shardflow does not use; run "
            "locally (cluster_mode='local') or on Ray (cluster_mode='ray', address=...)."
        )
    if runtime == "ray" or init_ray_on_spark:
        ray = require("ray", "ray", "init_orca_context on Ray")

        _started_ray = not ray.is_initialized()
        options = {} if num_cpus is None else {"num_cpus": num_cpus}
        sf.init(backend="ray", **options)
        return None
    sf.init(backend="local")
    sf.DataContext.get_current().num_cpus = num_cpus
    return None


def stop_orca_context() -> None:
    """Go back to the local backend; shut down Ray if ``init_orca_context`` started it."""
    global _started_ray
    import shardflow as sf

    if _started_ray:
        ray = require("ray", "ray", "init_orca_context on Ray")

        ray.shutdown()
        _started_ray = False
    sf.init(backend="local")
