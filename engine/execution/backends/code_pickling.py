"""Pickling transforms for worker processes without losing where the user's code is.

cloudpickle replaces the file name of every function it pickles by value (a function of
``__main__`` or a notebook) with ``"<dynamic-code>"``, so a traceback from a worker would not
name the user's file, and could not show the line. Code objects pickled here keep their file
name and line table: ``marshal`` round-trips them exactly within one Python version, which
the driver and its worker processes share.
"""

from __future__ import annotations

import io
import marshal
import types
from typing import Any

import cloudpickle


class _CodeKeepingPickler(cloudpickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is types.CodeType:
            return marshal.loads, (marshal.dumps(obj),)
        return super().reducer_override(obj)


def dumps(obj: Any, protocol: int = 5) -> bytes:
    """``cloudpickle.dumps(obj)``, with code objects keeping their file names."""
    buffer = io.BytesIO()
    _CodeKeepingPickler(buffer, protocol=protocol).dump(obj)
    return buffer.getvalue()
