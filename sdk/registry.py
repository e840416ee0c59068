"""Connector registry: names to Datasource/Datasink classes, from code or entry points.

Packages register connectors through the entry point group ``shardflow.connectors``. Each
entry point names an object that is either a :class:`ConnectorSpec`, a Datasource subclass,
or a callable returning a ConnectorSpec. Entry points are read lazily, the first time a
name is looked up; one that fails to load is reported by name and skipped, never breaking
``import shardflow``.

shardflow's own connectors are listed in :data:`BUILTIN_CONNECTORS` by dotted path, as
fsspec's registry lists its filesystems: nothing is imported until a name is used, and a
connector whose optional dependency is missing says what to install when it is used (and
shows as unavailable, with that hint, in listings).
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shardflow.sdk.optional import install_command

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "shardflow.connectors"


@dataclass
class ConnectorSpec:
    """A named connector.

    Args:
        name: The name users pass to ``read_datasource`` / ``write_datasink``.
        datasource: A Datasource class (or factory) called with the read arguments.
        datasink: A Datasink class (or factory) called with the write arguments.
        package: The distribution that provides it ("<code>" when registered in code).
    """

    name: str
    datasource: Callable[..., Any] | None = None
    datasink: Callable[..., Any] | None = None
    package: str = "<code>"
    capabilities: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LazyConnector:
    """A connector named by the dotted paths of its classes, imported on first use.

    Args:
        datasource: ``"package.module.ClassName"`` of the Datasource, or None.
        datasink: ``"package.module.ClassName"`` of the Datasink, or None.
        requires: Top-level modules of optional dependencies the connector needs.
        install: What to run when one of them is missing.
        package: The distribution that provides the connector.
    """

    datasource: str | None = None
    datasink: str | None = None
    requires: tuple[str, ...] = ()
    install: str = ""
    package: str = "shardflow"

    def missing_requirement(self) -> str | None:
        """The first required module that is not installed, or None."""
        for module in self.requires:
            try:
                if importlib.util.find_spec(module) is None:
                    return module
            except (ImportError, ValueError):
                return module
        return None

    def install_hint(self, name: str, module: str) -> str:
        hint = f" Install it with: {self.install}" if self.install else ""
        return (
            f"Connector {name!r} needs the optional dependency {module!r}, which is not "
            f"installed.{hint}"
        )


def _import_object(dotted: str) -> Any:
    module_name, _, attribute = dotted.replace(":", ".").rpartition(".")
    return getattr(importlib.import_module(module_name), attribute)


_CONNECTORS = "shardflow.connectors"

BUILTIN_CONNECTORS: dict[str, LazyConnector] = {
    "range": LazyConnector(f"{_CONNECTORS}.range.RangeDatasource"),
    "parquet": LazyConnector(
        f"{_CONNECTORS}.parquet.ParquetDatasource", f"{_CONNECTORS}.parquet.ParquetDatasink"
    ),
    "csv": LazyConnector(f"{_CONNECTORS}.csv.CSVDatasource", f"{_CONNECTORS}.csv.CSVDatasink"),
    "json": LazyConnector(f"{_CONNECTORS}.json.JSONDatasource", f"{_CONNECTORS}.json.JSONDatasink"),
    "text": LazyConnector(f"{_CONNECTORS}.text.TextDatasource"),
    "binary": LazyConnector(f"{_CONNECTORS}.binary.BinaryDatasource"),
    "numpy": LazyConnector(
        f"{_CONNECTORS}.numpy.NumpyDatasource", f"{_CONNECTORS}.numpy.NumpyDatasink"
    ),
    "images": LazyConnector(
        f"{_CONNECTORS}.images.ImageDatasource",
        f"{_CONNECTORS}.images.ImageDatasink",
        requires=("PIL",),
        install=install_command("images"),
    ),
    "iceberg": LazyConnector(
        f"{_CONNECTORS}.iceberg.IcebergDatasource",
        f"{_CONNECTORS}.iceberg.IcebergDatasink",
        requires=("pyiceberg",),
        install=install_command("iceberg"),
    ),
    "audio": LazyConnector(
        f"{_CONNECTORS}.audio.AudioDatasource",
        requires=("soundfile",),
        install=install_command("audio"),
    ),
    "videos": LazyConnector(
        f"{_CONNECTORS}.video.VideoDatasource",
        requires=("av",),
        install=install_command("video"),
    ),
    "lance": LazyConnector(
        f"{_CONNECTORS}.lance.LanceDatasource",
        f"{_CONNECTORS}.lance.LanceDatasink",
        requires=("lance",),
        install=install_command("lance"),
    ),
    "sql": LazyConnector(f"{_CONNECTORS}.sql.SQLDatasource", f"{_CONNECTORS}.sql.SQLDatasink"),
    "delta": LazyConnector(
        f"{_CONNECTORS}.delta.DeltaDatasource",
        f"{_CONNECTORS}.delta.DeltaDatasink",
        requires=("deltalake",),
        install=install_command("delta"),
    ),
    "hudi": LazyConnector(
        f"{_CONNECTORS}.hudi.HudiDatasource",
        requires=("hudi",),
        install=install_command("hudi"),
    ),
    "webdataset": LazyConnector(
        f"{_CONNECTORS}.webdataset.WebDatasetDatasource",
        f"{_CONNECTORS}.webdataset.WebDatasetDatasink",
    ),
    "tfrecords": LazyConnector(
        f"{_CONNECTORS}.tfrecords.TFRecordDatasource",
        f"{_CONNECTORS}.tfrecords.TFRecordDatasink",
        requires=("google.protobuf", "google_crc32c"),
        install=install_command("tfrecords"),
    ),
    "avro": LazyConnector(
        f"{_CONNECTORS}.avro.AvroDatasource",
        requires=("fastavro",),
        install=install_command("avro"),
    ),
    "orc": LazyConnector(f"{_CONNECTORS}.orc.ORCDatasource", f"{_CONNECTORS}.orc.ORCDatasink"),
    "lerobot": LazyConnector(
        f"{_CONNECTORS}.lerobot.LeRobotDatasource",
        requires=("av", "PIL"),
        install=install_command("lerobot"),
    ),
    "mcap": LazyConnector(
        f"{_CONNECTORS}.mcap.MCAPDatasource",
        requires=("mcap",),
        install=install_command("mcap"),
    ),
    "zarr": LazyConnector(
        f"{_CONNECTORS}.zarr.ZarrDatasource",
        requires=("zarr",),
        install=install_command("zarr"),
    ),
}
"""shardflow's connectors: name to dotted paths, imported when the name is first used."""


class ConnectorRegistry:
    """Thread-safe map of connector names to specs, with lazily loaded entry points.

    Args:
        lazy: Connectors known by dotted path (see :class:`LazyConnector`), imported when
            first looked up. The process-wide registry starts with :data:`BUILTIN_CONNECTORS`.
    """

    def __init__(self, lazy: dict[str, LazyConnector] | None = None) -> None:
        self._specs: dict[str, ConnectorSpec] = {}
        self._lazy: dict[str, LazyConnector] = dict(lazy or {})
        self._broken: dict[str, str] = {}
        self._entry_points_loaded = False
        self._lock = threading.RLock()

    def register_lazy(self, name: str, connector: LazyConnector) -> None:
        """Register ``connector`` under ``name``, to be imported when first looked up."""
        if not isinstance(connector, LazyConnector):
            raise TypeError(f"register_lazy takes a LazyConnector, got {type(connector).__name__}.")
        if connector.datasource is None and connector.datasink is None:
            raise ValueError(f"Connector {name!r} needs a datasource, a datasink, or both.")
        with self._lock:
            self._lazy[name] = connector

    def register(
        self,
        name: str,
        *,
        datasource: Callable[..., Any] | None = None,
        datasink: Callable[..., Any] | None = None,
        package: str = "<code>",
        replace: bool = False,
    ) -> ConnectorSpec:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"A connector name must be a non-empty string, got {name!r}.")
        if datasource is None and datasink is None:
            raise ValueError(f"Connector {name!r} needs a datasource, a datasink, or both.")
        for role, obj in (("datasource", datasource), ("datasink", datasink)):
            if obj is not None and not callable(obj):
                raise TypeError(f"{role} of connector {name!r} must be a class or a factory.")
        with self._lock:
            lazy = self._lazy.get(name)
            if lazy is not None:
                if not replace and lazy.package != package:
                    raise ValueError(
                        f"Two connectors are named {name!r}: one from package {lazy.package!r} "
                        f"and one from {package!r}. Uninstall one, or register with replace=True."
                    )
                del self._lazy[name]
            existing = self._specs.get(name)
            if existing is not None and not replace and existing.package != package:
                raise ValueError(
                    f"Two connectors are named {name!r}: one from package {existing.package!r} "
                    f"and one from {package!r}. Uninstall one, or register with replace=True."
                )
            spec = ConnectorSpec(
                name, datasource, datasink, package, _capabilities(datasource, datasink)
            )
            self._specs[name] = spec
            return spec

    def get(self, name: str) -> ConnectorSpec:
        self._load_entry_points()
        with self._lock:
            if name in self._specs:
                return self._specs[name]
            if name in self._lazy:
                return self._resolve(name)
            if name in self._broken:
                raise ImportError(f"Connector {name!r} failed to load: {self._broken[name]}")
            known = ", ".join(sorted(set(self._specs) | set(self._lazy))) or "none"
        raise KeyError(
            f"No connector named {name!r}. Registered connectors: {known}. Install the package "
            "that provides it, or call shardflow.register_connector()."
        )

    def list(self) -> builtins.list[ConnectorSpec]:
        """Every usable connector, sorted by name (imports the lazily registered ones)."""
        self._load_entry_points()
        with self._lock:
            for name, lazy in sorted(self._lazy.items()):
                if lazy.missing_requirement() is None:
                    try:
                        self._resolve(name)
                    except Exception as exc:
                        self._broken[name] = f"{type(exc).__name__}: {exc}"
                        del self._lazy[name]
                        logger.warning("Connector %r failed to load and is skipped: %s", name, exc)
            return [self._specs[name] for name in sorted(self._specs)]

    def broken(self) -> dict[str, str]:
        """Connectors that cannot be used: name to reason (a failed entry point, or an optional
        dependency to install)."""
        self._load_entry_points()
        with self._lock:
            broken = dict(self._broken)
            for name, lazy in self._lazy.items():
                module = lazy.missing_requirement()
                if module is not None:
                    broken[name] = lazy.install_hint(name, module)
            return broken

    def _resolve(self, name: str) -> ConnectorSpec:
        """Import a lazily registered connector and register its classes (lock held)."""
        lazy = self._lazy[name]
        module = lazy.missing_requirement()
        if module is not None:
            raise ImportError(lazy.install_hint(name, module))
        datasource = _import_object(lazy.datasource) if lazy.datasource else None
        datasink = _import_object(lazy.datasink) if lazy.datasink else None
        del self._lazy[name]
        spec = ConnectorSpec(
            name, datasource, datasink, lazy.package, _capabilities(datasource, datasink)
        )
        self._specs[name] = spec
        return spec

    def _load_entry_points(self) -> None:
        with self._lock:
            if self._entry_points_loaded:
                return
            self._entry_points_loaded = True
            try:
                from importlib import metadata as importlib_metadata  # ~8 ms: only when needed

                entry_points = importlib_metadata.entry_points(group=ENTRY_POINT_GROUP)
            except Exception as exc:  # a broken installation must not break import
                logger.warning("Could not read entry points %r: %s", ENTRY_POINT_GROUP, exc)
                return
            for ep in entry_points:
                package = ep.dist.name if ep.dist is not None else ep.value
                if ep.name in self._broken and ep.name not in self._specs:
                    continue  # already claimed by two packages, or broken
                if ep.name in self._lazy and self._lazy[ep.name].package != package:
                    # Claimed by shardflow and by a package: use neither, as for two packages.
                    reason = (
                        f"Two connectors are named {ep.name!r}: one from package "
                        f"{self._lazy[ep.name].package!r} and one from {package!r}. "
                        "Uninstall one, or register with replace=True."
                    )
                    del self._lazy[ep.name]
                    self._broken[ep.name] = reason
                    logger.warning("Connector %r from %s skipped: %s", ep.name, package, reason)
                    continue
                try:
                    spec = _spec_from_entry_point(ep.name, ep.load())
                    self.register(
                        ep.name, datasource=spec.datasource, datasink=spec.datasink, package=package
                    )
                except ValueError as exc:
                    # Two packages claim the name: use neither, so what runs never depends on
                    # install order. A connector registered in code keeps the name.
                    existing = self._specs.get(ep.name)
                    if existing is not None and existing.package != "<code>":
                        del self._specs[ep.name]
                    self._broken[ep.name] = str(exc)
                    logger.warning("Connector %r from %s skipped: %s", ep.name, package, exc)
                except Exception as exc:
                    reason = f"{type(exc).__name__}: {exc} (entry point {ep.value!r} of {package})"
                    self._broken[ep.name] = reason
                    logger.warning(
                        "Connector %r failed to load and is skipped: %s", ep.name, reason
                    )


def _spec_from_entry_point(name: str, obj: Any) -> ConnectorSpec:
    from shardflow.sdk.datasink import Datasink
    from shardflow.sdk.datasource import Datasource

    if isinstance(obj, ConnectorSpec):
        return obj
    if isinstance(obj, type) and issubclass(obj, Datasource):
        return ConnectorSpec(name, datasource=obj)
    if isinstance(obj, type) and issubclass(obj, Datasink):
        return ConnectorSpec(name, datasink=obj)
    if callable(obj):
        result = obj()
        if isinstance(result, ConnectorSpec):
            return result
    raise TypeError(
        f"Entry point {name!r} must name a ConnectorSpec, a Datasource or Datasink class, or a "
        f"function returning a ConnectorSpec; got {type(obj).__name__}."
    )


def _capabilities(datasource: Any, datasink: Any) -> list[str]:
    caps = []
    if datasource is not None:
        caps.append("read")
        if isinstance(datasource, type):
            from shardflow.sdk.datasource import Datasource

            base = Datasource
            if (
                getattr(datasource, "supports_projection_pushdown", None)
                is not base.supports_projection_pushdown
            ):
                caps.append("projection")
            if (
                getattr(datasource, "supports_predicate_pushdown", None)
                is not base.supports_predicate_pushdown
            ):
                caps.append("filter")
    if datasink is not None:
        caps.append("write")
    return caps


_REGISTRY = ConnectorRegistry(lazy=BUILTIN_CONNECTORS)


def get_registry() -> ConnectorRegistry:
    """The process-wide registry."""
    return _REGISTRY


def register_connector(
    name: str,
    *,
    datasource: Callable[..., Any] | None = None,
    datasink: Callable[..., Any] | None = None,
    replace: bool = False,
) -> ConnectorSpec:
    """Register a connector under ``name`` so ``read_datasource(name, ...)`` finds it.

    Args:
        name: The connector's name.
        datasource: A Datasource class or factory; called with the read arguments.
        datasink: A Datasink class or factory; called with the write arguments.
        replace: Replace an existing connector of the same name.

    Returns:
        The registered ConnectorSpec.

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.sdk import Datasource
        >>> class Empty(Datasource):
        ...     def get_read_tasks(self, parallelism, **kwargs):
        ...         return []
        >>> _ = sf.register_connector("empty-example", datasource=Empty, replace=True)
        >>> sf.read_datasource("empty-example").count()
        0
    """
    return _REGISTRY.register(name, datasource=datasource, datasink=datasink, replace=replace)
