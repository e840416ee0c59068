"""The default decoding and encoding of WebDataset members, by the suffix's last extension.

The same extensions as Ray Data's defaults: ``txt``/``text`` are UTF-8 strings, ``cls`` and
``cls2`` integers, ``json`` JSON values, ``jpg``/``png``/``ppm``/``pgm``/``pbm``/``pnm``
images (NumPy arrays of pixels, or Pillow images with ``format="PIL"``), ``npy`` NumPy
arrays and ``mp`` MessagePack. Other members stay bytes. Pickled members (``pt``, ``pth``,
``pickle``, ``pkl``) are never loaded by the default decoder: unpickling can run code.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from shardflow.sdk.optional import require

Codec = Callable[[dict[str, Any]], dict[str, Any]]

IMAGE_EXTENSIONS = ("jpg", "png", "ppm", "pgm", "pbm", "pnm")
_WRITE_IMAGE_EXTENSIONS = IMAGE_EXTENSIONS + ("jpeg",)
_PICKLED = ("pt", "pth", "pickle", "pkl")
_PIL_FORMATS = {"jpg": "JPEG", "jpeg": "JPEG", "pgm": "PPM", "pbm": "PPM", "pnm": "PPM"}


def _pillow() -> Any:
    return require("PIL.Image", "webdataset", "Decoding and encoding WebDataset images")


def _msgpack() -> Any:
    return require("msgpack", "webdataset", "Decoding and encoding WebDataset .mp members")


def extension_of(suffix: str) -> str:
    """The last extension of a member suffix: ``"seg.png"`` -> ``"png"``."""
    return suffix.rpartition(".")[2]


def decode_member(suffix: str, data: bytes, image_format: Any = True) -> Any:
    """The value of one member, decoded by its extension (bytes when none applies).

    Raises:
        ValueError: the content is not valid for its extension, or it is pickled.
    """
    extension = extension_of(suffix)
    if extension in ("txt", "text"):
        return data.decode("utf-8")
    if extension in ("cls", "cls2"):
        return int(data.decode("utf-8"))
    if extension in IMAGE_EXTENSIONS:
        image = _pillow().open(io.BytesIO(data))
        if image_format == "PIL":
            return image
        with image:
            return np.asarray(image)
    if extension == "json":
        return json.loads(data)
    if extension == "npy":
        return np.load(io.BytesIO(data), allow_pickle=False)
    if extension == "mp":
        return _msgpack().unpackb(data, raw=False)
    if extension in _PICKLED:
        raise ValueError(
            f"member {suffix!r} is pickled, and the default decoder never unpickles (it could "
            "run code). If the shards come from a trusted source, pass a decoder function "
            "that loads it (e.g. with torch.load or pickle.loads)."
        )
    return data


def default_decoder(sample: dict[str, Any], format: Any = True) -> dict[str, Any]:
    """Decode every member of ``sample`` by its extension (see the module's docstring).

    Args:
        sample: ``{"__key__": ..., suffix: bytes, ...}``; keys starting with ``__`` are kept.
        format: ``"PIL"`` to keep images as Pillow images, anything else for NumPy arrays.

    Returns:
        A new dict with the decoded values.
    """
    decoded = dict(sample)
    for suffix, value in sample.items():
        if suffix.startswith("__") or not isinstance(value, (bytes, bytearray, memoryview)):
            continue
        try:
            decoded[suffix] = decode_member(suffix, bytes(value), format)
        except ImportError:
            raise
        except Exception as exc:
            raise ValueError(
                f"sample {sample.get('__key__')!r}: member {suffix!r} cannot be decoded as "
                f".{extension_of(suffix)}: {type(exc).__name__}: {exc}"
            ) from exc
    return decoded


def encode_member(suffix: str, value: Any, image_format: Any = True) -> Any:
    """The bytes of one member from its value, by its extension (other values unchanged).

    Bytes are written as they are, whatever the extension (an image already encoded, say).
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    extension = extension_of(suffix)
    if extension == "txt":
        return value.encode("utf-8") if isinstance(value, str) else value
    if extension in ("cls", "cls2"):
        return str(value).encode("utf-8")
    if extension in _WRITE_IMAGE_EXTENSIONS:
        image = value
        if isinstance(value, np.ndarray):
            image = _pillow().fromarray(value)
        if not hasattr(image, "save"):
            raise TypeError(
                f"column {suffix!r} must hold images (NumPy arrays or Pillow images) to be "
                f"encoded as .{extension}; got {type(value).__name__}."
            )
        out = io.BytesIO()
        image.save(out, format=_PIL_FORMATS.get(extension, extension.upper()))
        return out.getvalue()
    if extension == "json":
        return json.dumps(_plain(value)).encode("utf-8")
    if extension == "npy":
        out = io.BytesIO()
        np.save(out, np.asarray(value), allow_pickle=False)
        return out.getvalue()
    if extension == "mp":
        return _msgpack().packb(_plain(value))
    if extension in _PICKLED:
        import pickle

        return pickle.dumps(value)
    return value


def _plain(value: Any) -> Any:
    """``value`` with NumPy arrays and scalars as Python lists and numbers (for JSON)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def default_encoder(sample: dict[str, Any], format: Any = True) -> dict[str, Any]:
    """Encode every value of ``sample`` by its column's extension (see :func:`encode_member`)."""
    encoded = dict(sample)
    for suffix, value in sample.items():
        if suffix.startswith("__") or value is None:
            continue
        try:
            encoded[suffix] = encode_member(suffix, value, format)
        except (ImportError, TypeError):
            raise
        except Exception as exc:
            raise ValueError(
                f"sample {sample.get('__key__')!r}: column {suffix!r} cannot be encoded as "
                f".{extension_of(suffix)}: {type(exc).__name__}: {exc}"
            ) from exc
    return encoded


def as_codecs(spec: Any, default: Callable[..., dict[str, Any]], argument: str) -> list[Codec]:
    """The functions a ``decoder=``/``encoder=`` argument applies, in order.

    ``True``, ``False`` or a string select the default codec (a string is its format, e.g.
    ``"PIL"``); a function is applied to each sample; a list applies its items in order;
    None applies nothing.
    """
    if spec is None:
        return []
    items = list(spec) if isinstance(spec, (list, tuple)) else [spec]
    codecs: list[Codec] = []
    for item in items:
        if isinstance(item, (bool, str)):
            codecs.append(partial(default, format=item))
        elif callable(item):
            codecs.append(item)
        else:
            raise TypeError(
                f"{argument} must be True (the default codec), a format string such as 'PIL', "
                f"a function of a sample dict returning a dict, a list of those, or None; got "
                f"{item!r}."
            )
    return codecs


def apply_codecs(codecs: list[Codec], sample: dict[str, Any], argument: str) -> dict[str, Any]:
    """``sample`` passed through ``codecs``; each must return a dict."""
    for codec in codecs:
        sample = codec(sample)
        if not isinstance(sample, dict):
            raise TypeError(
                f"the {argument} function must return the sample as a dict; got "
                f"{type(sample).__name__}."
            )
    return sample
