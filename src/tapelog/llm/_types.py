"""Provider-neutral request, stream chunk and usage types.

The loop builds an :class:`LlmRequest` from the log (prefix + message snapshot
+ header), deep-frozen; a wire format turns it into body bytes (a pure
function), and a provider client streams the response back as neutral chunks.
Chunks are plain frozen JSON objects because they are logged verbatim as the
``chunk`` of ``assistant/chunk`` events (docs/format.md lists the kinds).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from tapelog.cache._api import estimate_bytes
from tapelog.llm._pieces import BodyCache, WireBody
from tapelog.log._api import FrozenDict, freeze
from tapelog.request import LlmRequest

__all__ = [
    "AbortHandle",
    "LlmRequest",
    "ProviderClient",
    "WireFormat",
    "encode_wire_body",
    "estimate_tokens",
    "normalise_usage",
    "usage_count",
    "usage_prompt_tokens",
]


class AbortHandle:
    """A live abort signal that stays usable while the request is frozen."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.reason: str | None = None

    def abort(self, reason: str = "aborted") -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()


class WireFormat(Protocol):
    """A pure serializer: request -> exact HTTP body bytes (same request, same bytes).

    ``cache`` (a :class:`tapelog.llm.BodyCache`) lets a wire reuse each surface
    node's encoded bytes across steps; it never changes the result.
    """

    @property
    def name(self) -> str: ...

    def encode_body(self, request: LlmRequest, *, cache: BodyCache | None = None) -> bytes: ...


def encode_wire_body(
    wire: WireFormat, request: LlmRequest, *, cache: BodyCache | None = None
) -> WireBody:
    """``wire``'s body for ``request`` as a :class:`WireBody`, never joined on the way.

    A wire with ``encode_parts`` (the built-in ones) gives its parts; any other
    its ``encode_body`` bytes as the one part. Same bytes either way.
    """
    encode_parts = getattr(wire, "encode_parts", None)
    if encode_parts is None:
        return WireBody((wire.encode_body(request, cache=cache),))
    return WireBody(encode_parts(request, cache=cache))


class ProviderClient(Protocol):
    """Sends a request and yields neutral chunks (see docs/format.md, "Chunks").

    The last chunk is always ``{"kind": "finish", "reason": ...}``; usage
    arrives as ``{"kind": "usage", ...}`` when the provider reports it. HTTP and
    protocol failures raise :class:`tapelog.ProviderError` (``retryable`` set for
    429, 5xx and connection errors).

    ``body``, when given, is what to send, exactly: the loop passes the body
    the checker compared as the wire's parts (a ``WireBody``: never joined on
    the way; ``bytes(body)`` is the one bytes object, for a client that needs
    it), a one-shot call its bytes; without it the client encodes ``request``
    itself.
    """

    provider: str

    @property
    def wire(self) -> WireFormat: ...

    def stream(
        self, request: LlmRequest, *, abort: AbortHandle, body: bytes | WireBody | None = None
    ) -> AsyncIterator[FrozenDict]: ...


_USAGE_KEYS = ("input", "cache_read", "cache_write", "output", "reasoning")


def usage_count(value: Any) -> int:
    """A provider's token count as an int: 0 when missing or not an integer (a bool is not)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def normalise_usage(
    *,
    input: int = 0,
    cache_read: int = 0,
    cache_write: int = 0,
    output: int = 0,
    reasoning: int = 0,
    raw: Mapping[str, Any] | None = None,
    cache_diagnostics: Mapping[str, Any] | None = None,
) -> FrozenDict:
    """Disjoint token counts: ``input`` is uncached, uncreated prompt tokens.

    Prompt total = input + cache_read + cache_write. ``raw`` keeps the
    provider's own usage object for audit, ``cache_diagnostics`` the
    provider's own verdict on its prompt cache, as given (docs/format.md).
    """
    out: dict[str, Any] = {
        "input": int(input),
        "cache_read": int(cache_read),
        "cache_write": int(cache_write),
        "output": int(output),
        "reasoning": int(reasoning),
    }
    if raw is not None:
        out["raw"] = raw
    if cache_diagnostics is not None:
        out["cache_diagnostics"] = cache_diagnostics
    usage: FrozenDict = freeze(out)
    return usage


def estimate_tokens(data: bytes) -> int:
    """The documented token estimate used by the emulator, compaction and the
    audit: one token per started 4 bytes of canonical JSON."""
    return estimate_bytes(data)


def usage_prompt_tokens(usage: Mapping[str, Any]) -> int:
    """Total prompt tokens of a normalised usage object."""
    return int(usage.get("input", 0) + usage.get("cache_read", 0) + usage.get("cache_write", 0))
