"""The exceptions XShards raises for misuse, with Orca's messages and types.

Orca raises ``RuntimeError`` (its ``invalidInputError``) when a shard has no such key, two
XShards cannot be zipped, reader options contradict each other, and so on; code written for
Orca catches ``RuntimeError`` or ``Exception`` and looks for Orca's words in the message.
Python code expects ``KeyError``, ``TypeError`` or ``ValueError`` for the same mistakes. Each
class here is both, so either ``except`` clause catches it, and each message starts with
Orca's sentence.
"""

from __future__ import annotations


class XShardsError(RuntimeError):
    """A misuse of the XShards API (Orca raises ``RuntimeError`` for these)."""


class XShardsKeyError(XShardsError, KeyError):
    """A shard has no such key or column (also a ``KeyError``)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class XShardsTypeError(XShardsError, TypeError):
    """An operation does not apply to shards of this type (also a ``TypeError``)."""


class XShardsValueError(XShardsError, ValueError):
    """An argument or the shards' shape does not fit the operation (also a ``ValueError``)."""


__all__ = ["XShardsError", "XShardsKeyError", "XShardsTypeError", "XShardsValueError"]
