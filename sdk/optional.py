"""Optional dependencies: imported when a feature is used, never by ``import shardflow``.

Each optional dependency belongs to a pip extra of shardflow (``pip install 'shardflow[ray]'``).
Code that needs one calls :func:`require` where the feature starts, so a missing package costs
nothing until then and the error says exactly what to install.

Examples:
    >>> from shardflow.sdk.optional import install_command, require
    >>> install_command("ray")
    "pip install 'shardflow[ray]'"
    >>> require("json", "none", "Reading JSON").__name__
    'json'
"""

from __future__ import annotations

import importlib
from types import ModuleType

EXTRAS: dict[str, str] = {
    "ray": "ray",
    "torch": "torch",
    "PIL": "images",
    "s3fs": "s3",
    "gcsfs": "gcs",
    "pyiceberg": "iceberg",
    "deltalake": "delta",
    "hudi": "hudi",
    "psycopg": "sql",
    "daft": "daft",
    "datasets": "huggingface",
    "soundfile": "audio",
    "av": "video",
    "lance": "lance",
    "fastavro": "avro",
    "mcap": "mcap",
    "zarr": "zarr",
    "google_crc32c": "tfrecords",
    "google.protobuf": "tfrecords",
    "msgpack": "webdataset",
    "dask": "dask",
    "modin": "modin",
    "tensorflow": "tensorflow",
    "pyspark": "spark",
}
"""Top-level module of each optional dependency to the shardflow extra that installs it."""

_DISTRIBUTIONS = {
    "PIL": "Pillow",
    "lance": "pylance",
    "google": "protobuf",
    "google_crc32c": "google-crc32c",
}
"""Package names that differ from their module's name, for messages."""


def install_command(extra: str) -> str:
    """The pip command that installs shardflow with ``extra``."""
    return f"pip install 'shardflow[{extra}]'"


def missing_message(module: str, extra: str, feature: str, reason: str | None = None) -> str:
    """The message of the ImportError raised when ``feature`` cannot import ``module``.

    Args:
        module: The module that failed to import (``"ray"``, ``"PIL.Image"``, ...).
        extra: The shardflow extra that installs it.
        feature: What the caller was doing, as the start of a sentence.
        reason: Why an installed module failed to import; None when it is not installed.
    """
    root = module.partition(".")[0]
    package = _DISTRIBUTIONS.get(root, root)
    state = "which is not installed" if reason is None else f"which failed to import ({reason})"
    return f"{feature} needs {package}, {state}. Install it with: {install_command(extra)}"


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module``, or raise an ImportError that names the extra to install.

    Args:
        module: Dotted module name (``"ray"``, ``"PIL.Image"``, ``"pyiceberg.catalog"``).
        extra: The shardflow extra that installs it (``"ray"``, ``"images"``, ...).
        feature: What needs it, as the start of a sentence (``"read_images"``).

    Returns:
        The imported module.

    Raises:
        ImportError: The module is missing (or fails to import); the message names the
            feature and the ``pip install 'shardflow[extra]'`` command.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = isinstance(exc, ModuleNotFoundError) and _is_the_module(exc.name, module)
        reason = None if missing else f"{type(exc).__name__}: {exc}"
        raise ImportError(missing_message(module, extra, feature, reason)) from exc


def _is_the_module(name: str | None, module: str) -> bool:
    """Whether the module reported missing is ``module`` or one of its parents."""
    if name is None:
        return True
    return module == name or module.startswith(name + ".")
