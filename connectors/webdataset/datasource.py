"""WebDatasetDatasource: WebDataset tar shards read as rows, one per sample."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from shardflow.connectors.webdataset.codecs import (
    apply_codecs,
    as_codecs,
    default_decoder,
)
from shardflow.connectors.webdataset.samples import (
    KEY,
    URL,
    check_renamer,
    check_selector,
    group_samples,
    tar_members,
)
from shardflow.sdk.block import Block, rows_to_block
from shardflow.sdk.file_datasource import FileBasedDatasource

logger = logging.getLogger(__name__)

SAMPLES_PER_BLOCK = 512  # as Ray Data's reader
_BYTES_PER_BLOCK = 64 * 1024 * 1024  # of member content: a block of large images ends sooner


class WebDatasetDatasource(FileBasedDatasource):
    """Reads WebDataset tar shards. See :func:`shardflow.read_webdataset` for the arguments.

    Each shard is read as a forward-only stream (a ``.tar.gz`` shard is decompressed on the
    way), so shards on S3 or GCS are never downloaded whole before their first sample.
    """

    _ENCODING_RATIO = 2.0  # decoded images are larger than their files; tar headers smaller

    def __init__(
        self,
        paths: Any,
        *,
        decoder: Any = True,
        fileselect: Any = None,
        filerename: Any = None,
        suffixes: Any = None,
        verbose_open: bool = False,
        expand_json: bool = False,
        **kwargs: Any,
    ):
        super().__init__(paths, **kwargs)
        if self._file_args:
            raise TypeError(f"Unknown arguments for read_webdataset: {sorted(self._file_args)}.")
        self._decoders = as_codecs(decoder, default_decoder, "decoder")
        self._fileselect = check_selector(fileselect, "fileselect")
        self._filerename = check_renamer(filerename)
        self._suffixes = check_selector(suffixes, "suffixes")
        self._verbose_open = bool(verbose_open)
        self._expand_json = bool(expand_json)

    def get_name(self) -> str:
        return "WebDataset"

    def reads_hold_the_gil(self) -> bool:
        return True  # records are decoded one by one in Python: worker processes, locally

    def _member_filter(self) -> Callable[[str], bool] | None:
        """Members to keep when a projection leaves some unused: only when every decoder is
        the default one (which decodes each member to a column of its own name), so members
        no column needs are never decoded."""
        columns = self.pushdowns.columns
        if columns is None or self._expand_json:
            return None
        if not all(isinstance(d, partial) and d.func is default_decoder for d in self._decoders):
            return None
        needed = frozenset(columns)
        return needed.__contains__

    def _read_stream(self, f: Any, path: str) -> Iterator[Block]:
        if self._verbose_open:
            logger.info("Reading WebDataset shard %s", path)
        members = tar_members(f, fileselect=self._fileselect, filerename=self._filerename)
        samples = group_samples(members, suffixes=self._suffixes, keep=self._member_filter())
        rows: list[Any] = []
        size = 0
        for sample in samples:
            size += sum(len(v) for k, v in sample.items() if k != KEY)
            sample[URL] = path
            sample = apply_codecs(self._decoders, sample, "decoder")
            if self._expand_json:
                sample = _expand_json(sample)
            rows.append(sample)
            if len(rows) >= SAMPLES_PER_BLOCK or size >= _BYTES_PER_BLOCK:
                yield rows_to_block(rows)
                rows, size = [], 0
        if rows:
            yield rows_to_block(rows)
        if self._verbose_open:
            logger.info("Finished WebDataset shard %s", path)


def _expand_json(sample: dict[str, Any]) -> dict[str, Any]:
    """The fields of the sample's ``json`` member as columns of their own (existing columns
    keep their values)."""
    value = sample.get("json")
    if isinstance(value, (bytes, bytearray)):
        value = json.loads(value)
    elif isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, dict):
        raise ValueError(
            f"expand_json=True needs each sample's 'json' member to be a JSON object; sample "
            f"{sample.get(KEY)!r} has {type(value).__name__}."
        )
    expanded = dict(sample)
    for name, field in value.items():
        expanded.setdefault(name, field)
    return expanded
