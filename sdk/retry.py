"""Retries of transient storage errors, with exponential backoff.

Object stores throttle (S3 ``SlowDown``, HTTP 429), fail now and then with a 5xx, and drop
connections. Such errors are worth another attempt; a missing file or a corrupt one is not.
The engine passes its ``DataContext.retry`` policy to datasources at planning time as a
:class:`RetryConfig` (the SDK never imports the engine); code that has none uses the defaults.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

_TRANSIENT_STATUS = {408, 429, 500, 502, 503, 504}

# Lower-cased fragments of messages (or error codes) that object-store clients use for
# throttling, server faults and dropped connections.
_TRANSIENT_MARKERS = (
    "slowdown",
    "slow down",
    "throttl",
    "toomanyrequests",
    "too many requests",
    "reduce your request rate",
    "requesttimeout",
    "request timeout",
    "internalerror",
    "internal error",
    "service unavailable",
    "serviceunavailable",
    "bad gateway",
    "gateway timeout",
    "connection reset",
    "connection aborted",
    "connection refused",
    "broken pipe",
    "server disconnected",
    "timed out",
    "timeout",
    "temporarily unavailable",
)

_TRANSIENT_TYPE_NAMES = {
    "ConnectionError",
    "ConnectionResetError",
    "ConnectionAbortedError",
    "ConnectionRefusedError",
    "BrokenPipeError",
    "TimeoutError",
    "ServerDisconnectedError",
    "ClientConnectionError",
    "ClientOSError",
    "ClientPayloadError",
    "ServerTimeoutError",
    "ReadTimeoutError",
    "ConnectTimeoutError",
    "EndpointConnectionError",
    "ResponseStreamingError",
    "IncompleteReadError",
    "TransientError",
}

# Never transient, whatever their message says.
_PERMANENT_TYPES = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


class TransientError(OSError):
    """An error that a later attempt may not meet; raise it to ask for a retry."""


@dataclass(frozen=True)
class RetryConfig:
    """How transient storage errors are retried (a picklable copy of the engine's policy).

    Args:
        max_attempts: Attempts per operation, including the first.
        initial_backoff_s: Wait before the first retry; doubles each time, with jitter.
        max_backoff_s: Upper bound of one wait.
        retried_errors: Fragments of error messages that mark an error as transient beyond
            those recognised anyway (``DataContext.retried_io_errors``, Ray Data's setting:
            an error is retried when its message contains one of them).
    """

    max_attempts: int = 5
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 10.0
    retried_errors: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise TypeError(f"max_attempts must be an int, got {self.max_attempts!r}.")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}.")
        if self.initial_backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError("Backoff times must be >= 0.")
        errors = self.retried_errors
        if isinstance(errors, str) or not all(isinstance(e, str) for e in errors):
            raise TypeError(f"retried_errors must be a sequence of strings, got {errors!r}.")
        object.__setattr__(self, "retried_errors", tuple(errors))

    def is_retryable(self, exc: BaseException) -> bool:
        """Whether ``exc`` is transient, or its message (or a cause's) holds one of
        ``retried_errors``."""
        if is_transient_error(exc):
            return True
        if not self.retried_errors:
            return False
        return any(m in str(err) for err in _chain(exc) for m in self.retried_errors)

    @classmethod
    def from_policy(cls, policy: Any) -> RetryConfig:
        """Copy any object with ``max_attempts``, ``initial_backoff_s`` and ``max_backoff_s``
        (the engine's ``RetryPolicy``); None gives the defaults."""
        if policy is None:
            return cls()
        if isinstance(policy, RetryConfig):
            return policy
        return cls(
            max_attempts=int(getattr(policy, "max_attempts", cls.max_attempts)),
            initial_backoff_s=float(getattr(policy, "initial_backoff_s", cls.initial_backoff_s)),
            max_backoff_s=float(getattr(policy, "max_backoff_s", cls.max_backoff_s)),
        )

    @classmethod
    def from_data_context(cls, data_context: Any) -> RetryConfig:
        """The retry policy of an engine DataContext (or the defaults when None), with its
        ``retried_io_errors``."""
        policy = cls.from_policy(getattr(data_context, "retry", None))
        errors = tuple(getattr(data_context, "retried_io_errors", None) or ())
        if not errors:
            return policy
        return cls(
            max_attempts=policy.max_attempts,
            initial_backoff_s=policy.initial_backoff_s,
            max_backoff_s=policy.max_backoff_s,
            retried_errors=errors,
        )

    def backoff_s(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        base = min(self.max_backoff_s, self.initial_backoff_s * (2 ** (attempt - 1)))
        return base * (0.5 + random.random() / 2)


def _status_of(exc: BaseException) -> int | None:
    for attr in ("status", "status_code", "code", "http_status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        meta = response.get("ResponseMetadata") or {}
        status = meta.get("HTTPStatusCode")
        if isinstance(status, int):
            return status
        code = str((response.get("Error") or {}).get("Code", "")).lower()
        if any(marker in code for marker in _TRANSIENT_MARKERS):
            return 503
    return None


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def is_transient_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) looks like a transient fault.

    Examples:
        >>> from shardflow.sdk.retry import is_transient_error
        >>> is_transient_error(ConnectionResetError("reset by peer"))
        True
        >>> is_transient_error(FileNotFoundError("s3://b/missing.csv"))
        False
    """
    for err in _chain(exc):
        if isinstance(err, _PERMANENT_TYPES):
            return False
        if any(cls.__name__ in _TRANSIENT_TYPE_NAMES for cls in type(err).__mro__):
            return True
        status = _status_of(err)
        if status is not None and status in _TRANSIENT_STATUS:
            return True
        message = str(err).lower()
        if any(marker in message for marker in _TRANSIENT_MARKERS):
            return True
    return False


def _location(description: str) -> str:
    """The URL in a description such as ``"look up s3://bucket/prefix"`` (or all of it)."""
    match = re.search(r"[a-z0-9]+://\S*", description)
    return match.group(0) if match else description


def call_with_retry(
    fn: Callable[[], T],
    *,
    description: str,
    config: RetryConfig | None = None,
    is_retryable: Callable[[BaseException], bool] | None = None,
) -> T:
    """Call ``fn`` until it succeeds, retrying transient errors with exponential backoff.

    Args:
        fn: The operation; it must be safe to repeat.
        description: What is attempted, for logs (e.g. ``"list s3://bucket/prefix"``).
        config: The retry policy; defaults to :class:`RetryConfig`.
        is_retryable: Decides which errors get another attempt; by default
            ``config.is_retryable`` (transient errors, and ``config.retried_errors``).

    Each retry is logged as a warning. When the attempts are spent, or the error is not
    transient, missing or refused credentials and an unreachable endpoint are raised as a
    :class:`~shardflow.sdk.storage_errors.StorageError` saying what to do; other errors as
    they are.

    Returns:
        What ``fn`` returned.

    Examples:
        >>> from shardflow.sdk.retry import RetryConfig, call_with_retry
        >>> call_with_retry(lambda: 42, description="answer")
        42
    """
    config = config or RetryConfig()
    is_retryable = is_retryable or config.is_retryable
    attempt = 1
    while True:
        try:
            return fn()
        except Exception as exc:
            if attempt >= config.max_attempts or not is_retryable(exc):
                from shardflow.sdk.storage_errors import raise_explained

                raise_explained(exc, _location(description), attempt)
                raise
            wait = config.backoff_s(attempt)
            logger.warning(
                "Transient error on %s (attempt %d of %d), retrying in %.2fs: %s: %s",
                description,
                attempt,
                config.max_attempts,
                wait,
                type(exc).__name__,
                exc,
            )
            time.sleep(wait)
            attempt += 1
