"""The one canonical JSON encoder and decoder of tapelog.

Logs, wire bodies and digests all go through these functions, so the same value
always becomes the same bytes: compact separators, UTF-8 (no ``\\u`` escapes for
non-ASCII), key order preserved as written (tool schemas must keep the user's key
order: a provider caches rendered tokens, and key order is part of them).

orjson does the work. It would write NaN as ``null``; callers never reach it
with such a value because everything logged is validated by ``freeze`` first,
and :func:`encode` validates values that are not frozen yet.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import orjson

from tapelog._errors import JsonValueError
from tapelog.log._freeze import FrozenDict, FrozenList, freeze_faithful

__all__ = [
    "decode",
    "decode_raw",
    "digest",
    "encode",
    "encode_sorted_trusted",
    "encode_str",
    "encode_trusted",
]


def encode(value: Any, *, path: str = "value") -> bytes:
    """Encode ``value`` as canonical JSON bytes, refusing anything lossy.

    The encoder never changes a value (it validates, it does not redact): the
    bytes of a request rebuilt from a log must not depend on which secrets the
    encoding process has registered.
    """
    if type(value) is not FrozenDict and type(value) is not FrozenList:
        value = freeze_faithful(value, path=path)
    return orjson.dumps(value)


def encode_trusted(value: Any) -> bytes:
    """:func:`encode` without the validating walk, for values built only from
    values that are lossless JSON already (frozen log data, or what
    :func:`decode` returned): the same bytes, without paying to check them again."""
    return orjson.dumps(value)


def encode_sorted_trusted(value: Any) -> bytes:
    """:func:`encode_trusted` with every object's keys sorted by code point, as
    ``sorted`` sorts them (the cache identities, which ignore envelope key order,
    are built in C with this instead of a Python walk).

    An ``orjson.Fragment`` inside ``value`` is copied as given."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def encode_str(value: Any, *, path: str = "value") -> str:
    """:func:`encode`, as text."""
    return encode(value, path=path).decode("utf-8")


def decode(data: bytes | bytearray | memoryview | str, *, path: str = "value") -> Any:
    """Decode JSON text strictly (NaN, Infinity and invalid UTF-8 are errors)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise JsonValueError(path, f"not valid JSON ({exc})") from None


decode_raw: Callable[[bytes], Any] = orjson.loads
""":func:`decode` without its error wrapping (raises :class:`ValueError` on bad
JSON), for a loop over many lines that handles a bad one itself: the
load's hot loop, where one Python call per line is a measurable share."""


def digest(value: Any) -> str:
    """SHA-256 of the canonical encoding, as ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(encode(value)).hexdigest()
