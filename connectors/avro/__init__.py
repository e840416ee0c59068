"""Avro: ``read_avro`` of Avro object container files, typed by the files' schemas.
Needs fastavro (``pip install 'shardflow[avro]'``), imported only when a file is read."""

from __future__ import annotations

from typing import Any

from shardflow.connectors.avro.datasource import AvroDatasource

__all__ = ["AvroDatasource"]


def __getattr__(name: str) -> Any:
    # ``shardflow check-connector avro`` finds the conformance suite here without the
    # connector importing the test kit.
    if name == "conformance":
        from shardflow.connectors.avro.conformance_suite import AvroSuite

        return AvroSuite
    raise AttributeError(name)
