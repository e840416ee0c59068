"""Image writes: ``Dataset.write_images``, one file per row, encoded with Pillow."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.connectors.images.datasource import _pillow
from shardflow.sdk.file_datasink import RowBasedFileDatasink


class ImageDatasink(RowBasedFileDatasink):
    """Writes one image file per row.

    See :meth:`shardflow.Dataset.write_images` for the arguments.
    """

    def __init__(self, path: str, column: str, file_format: str = "png", **kwargs: Any):
        if not isinstance(column, str) or not column:
            raise TypeError(f"column must name the column of images, got {column!r}.")
        if not isinstance(file_format, str) or not file_format:
            raise TypeError(
                f"file_format must be an image format such as 'png', got {file_format!r}."
            )
        self.pillow_format = pillow_save_format(file_format)
        super().__init__(path, file_format=file_format.lower().lstrip("."), **kwargs)
        self.column = column

    def get_name(self) -> str:
        return "Image"

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        if schema is not None and self.column not in schema.names:
            raise ValueError(
                f"Column {self.column!r} is not in the dataset; it has {schema.names}."
            )
        super().on_write_start(schema)

    def write_row_to_file(self, row: dict[str, Any], f: Any) -> None:
        if self.column not in row:
            raise ValueError(f"Column {self.column!r} is not in the data; it has {sorted(row)}.")
        f.write(encode_image(row[self.column], self.pillow_format))


def pillow_save_format(file_format: str) -> str:
    """Pillow's name of the format written under the extension ``file_format``.

    For example ``"jpg"`` gives ``"JPEG"``.

    Raises:
        ValueError: when Pillow cannot write that format.
    """
    Image = _pillow()
    Image.init()
    extension = "." + file_format.lower().lstrip(".")
    name = Image.registered_extensions().get(extension)
    if name is None or name not in Image.SAVE:
        extensions = Image.registered_extensions().items()
        writable = sorted({ext.lstrip(".") for ext, fmt in extensions if fmt in Image.SAVE})
        raise ValueError(
            f"Pillow cannot write image format {file_format!r}; choose one of "
            f"{_shortlist(writable)}."
        )
    return name


def _shortlist(names: Sequence[str]) -> str:
    common = [n for n in ("png", "jpg", "jpeg", "bmp", "gif", "tiff", "webp") if n in names]
    return ", ".join(common + (["..."] if len(names) > len(common) else []))


def encode_image(pixels: Any, pillow_format: str) -> bytes:
    """Encode an ``(H, W)`` or ``(H, W, C)`` array as an image file in ``pillow_format``.

    Raises:
        ValueError: when the array cannot be written in that format, saying why.
    """
    Image = _pillow()
    if pixels is None:
        raise ValueError("the image is null; drop null rows before write_images.")
    array = np.asarray(pixels)
    try:
        image = Image.fromarray(array)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"an array of shape {array.shape} and dtype {array.dtype} is not an image: Pillow "
            f"needs (H, W) or (H, W, 3 or 4) arrays, usually uint8 ({exc})."
        ) from None
    buffer = io.BytesIO()
    try:
        image.save(buffer, format=pillow_format)
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(
            f"cannot write an image of mode {image.mode} and shape {array.shape} as "
            f"{pillow_format}: {exc}"
        ) from None
    return buffer.getvalue()
