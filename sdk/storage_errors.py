"""Storage errors a user can act on, said in one paragraph: missing or wrong credentials, and
an endpoint that cannot be reached.

Object-store clients (botocore, aiohttp, google-auth, Arrow) report these as deep
tracebacks of their own. :func:`explain_storage_error` recognises them and returns an error
whose message names the location, the cause and what to do; the client's exception is kept
as ``original`` and is chained for display only when
``SHARDFLOW_LOG_INTERNAL_STACK_TRACE=1`` (or ``DataContext.log_internal_stack_trace``) asks.
"""

from __future__ import annotations

import os
import re

from shardflow.sdk.filesystems import redact_text

_CREDENTIAL_MISSING = (
    "unable to locate credentials",
    "nocredentialserror",
    "could not automatically determine credentials",
    "defaultcredentialserror",
    "no credentials",
    "anonymous caller does not have",
)
_CREDENTIAL_WRONG = (
    "invalidaccesskeyid",
    "signaturedoesnotmatch",
    "the aws access key id you provided does not exist",
    "the request signature we calculated does not match",
    "expiredtoken",
    "invalidtoken",
    "invalid_grant",
)
_ACCESS_DENIED = ("accessdenied", "access denied", "forbidden")
_REMOTE_SCHEMES = ("s3", "s3a", "gs", "gcs", "http", "https", "abfs", "az", "hf")
_UNREACHABLE = (
    "could not connect to the endpoint url",
    "cannot connect to host",
    "connect call failed",
    "connection refused",
    "name or service not known",
    "nodename nor servname provided",
    "temporary failure in name resolution",
    "failed to resolve",
    "no route to host",
    "network is unreachable",
    "connect timeout",
    "couldn't connect to server",
    "curlcode: 7",
)


class StorageError(OSError):
    """A storage error whose message says the cause and what to do. ``original`` is the
    storage client's own exception."""

    original: BaseException | None = None


class StorageCredentialsError(StorageError, PermissionError):
    """No credentials were found, or the store refused the ones given."""


class StorageUnreachableError(StorageError, ConnectionError):
    """The store's endpoint could not be reached (after the retries of the retry policy)."""


def _messages(exc: BaseException) -> list[tuple[str, str]]:
    """(type name, lower-cased message) of ``exc`` and the exceptions it was raised from."""
    found, seen = [], set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names = " ".join(cls.__name__.lower() for cls in type(current).__mro__)
        found.append((names, str(current).lower()))
        current = current.__cause__ or current.__context__
    return found


def _matches(exc: BaseException, markers: tuple[str, ...]) -> bool:
    return any(m in names or m in text for names, text in _messages(exc) for m in markers)


def _store(location: str) -> str:
    scheme = location.split("://", 1)[0].lower()
    return {"s3": "S3", "s3a": "S3", "gs": "GCS", "gcs": "GCS"}.get(scheme, "the store")


def _endpoint(exc: BaseException) -> str | None:
    for _, text in _messages(exc):
        match = re.search(r"(https?://[^\s\"'/]+)", text) or re.search(
            r"cannot connect to host ([^\s]+)", text
        )
        if match:
            return match.group(1).rstrip(":")
    return None


def explain_storage_error(
    exc: BaseException, location: str, attempts: int = 1
) -> StorageError | None:
    """The error to show instead of ``exc`` (raised while accessing ``location``), or None
    when ``exc`` is not one of the errors this module explains.

    Args:
        exc: What the storage client raised.
        location: The path or URL being accessed (credentials in it are never shown).
        attempts: How many attempts were made (the retry policy's).

    Examples:
        >>> from shardflow.sdk.storage_errors import explain_storage_error
        >>> error = explain_storage_error(RuntimeError("Unable to locate credentials"), "s3://b/x")
        >>> type(error).__name__
        'StorageCredentialsError'
    """
    if isinstance(exc, StorageError):
        return exc
    scheme = location.split("://", 1)[0].lower() if "://" in location else ""
    if scheme not in _REMOTE_SCHEMES:
        return None  # local files: the operating system's error says it already
    where = redact_text(location)
    store = _store(location)
    error: StorageError
    if _matches(exc, _CREDENTIAL_MISSING):
        error = StorageCredentialsError(
            f"{where}: no credentials for {store} were found. " + _credentials_hint(store)
        )
    elif _matches(exc, _CREDENTIAL_WRONG):
        error = StorageCredentialsError(
            f"{where}: {store} refused the credentials given ({_reason(exc)}). Check the key "
            "and secret (or token, or profile) for this account, and that they have not "
            "expired. " + _credentials_hint(store)
        )
    elif _matches(exc, _UNREACHABLE):
        endpoint = _endpoint(exc)
        target = f"the {store} endpoint {endpoint}" if endpoint else f"{store}"
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        error = StorageUnreachableError(
            f"{where}: could not connect to {target}{tries} ({_reason(exc)}). Check the "
            "endpoint (storage_options={'client_kwargs': {'endpoint_url': ...}} for S3, or "
            "AWS_ENDPOINT_URL), that the server runs, and that the network lets this "
            "machine reach it. DataContext.retry sets how many attempts are made."
        )
    elif isinstance(exc, PermissionError) or _matches(exc, _ACCESS_DENIED):
        error = StorageCredentialsError(
            f"{where}: {store} denied access ({_reason(exc)}). The credentials in use have no "
            "permission for this location: check the bucket's policy and the identity's "
            "permissions, or use other credentials. " + _credentials_hint(store)
        )
    else:
        return None
    error.original = exc
    return error


def _credentials_hint(store: str) -> str:
    if store == "S3":
        return (
            "Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), pass "
            "storage_options={'key': ..., 'secret': ...}, or storage_options={'anon': True} "
            "for a public bucket."
        )
    if store == "GCS":
        return (
            "Set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, run "
            "'gcloud auth application-default login', pass storage_options={'token': ...}, or "
            "storage_options={'token': 'anon'} for a public bucket."
        )
    return "Pass the credentials in storage_options."


def _reason(exc: BaseException) -> str:
    """The innermost message, short."""
    text = ""
    for _, message in _messages(exc):
        text = message or text
    original = str(exc)
    first = (original or text).strip().splitlines()[0] if (original or text).strip() else ""
    return redact_text(first[:200] or type(exc).__name__)


def show_library_traceback() -> bool:
    """Whether a user asked to see the storage client's own traceback too."""
    value = os.environ.get("SHARDFLOW_LOG_INTERNAL_STACK_TRACE", "")
    return value.strip().lower() in ("1", "true", "yes")


def raise_explained(exc: BaseException, location: str, attempts: int = 1) -> None:
    """Raise the explanation of ``exc`` when there is one (its traceback hidden unless asked
    for); return when there is none, so the caller re-raises ``exc``."""
    error = explain_storage_error(exc, location, attempts)
    if error is None or error is exc:
        return
    if show_library_traceback():
        raise error from exc
    raise error from None
