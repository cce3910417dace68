"""Each request body's byte length and SHA-256, as a report page shows them.

A long session's bodies are megabytes each and differ from one request to the
next only at their end: hashing each body whole, after joining its parts,
costs every byte of every body twice. The bodies here stay parts
(:func:`tapelog.llm.encode_wire_body`, one piece cache for all, so each costs
what it adds to the one before), and :class:`ChainedSha256` hashes the leading
parts a body shares with the one before once: the SHA-256 state after them is
kept and copied. The digests are those of the joined bytes, whatever the parts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from tapelog.llm._api import BodyCache, encode_wire_body, wire_for
from tapelog.log._api import EpochHeader
from tapelog.request._api import WalkedRequest

T = TypeVar("T")

__all__ = ["BodyDigest", "ChainedSha256", "WirePieces", "body_digests"]

BodyDigest = tuple[int, str]
"""A request body's byte length and SHA-256 (hex): what the page says of it."""


class ChainedSha256:
    """SHA-256 of bodies given as parts, one after another: the leading parts
    equal to the previous body's are hashed only once."""

    def __init__(self) -> None:
        self._parts: Sequence[bytes] = ()
        self._state = hashlib.sha256()
        self._hashed = 0
        """How many of :attr:`_parts`' leading parts :attr:`_state` has hashed."""

    def digest(self, parts: Sequence[bytes]) -> str:
        """The hex SHA-256 of ``b"".join(parts)``."""
        before, shared = self._parts, 0
        limit = min(len(parts), len(before))
        while shared < limit and parts[shared] == before[shared]:  # memcmp, or a length test
            shared += 1
        if shared < self._hashed:  # the body left the hashed prefix: start again
            self._state, self._hashed = hashlib.sha256(), 0
        for i in range(self._hashed, shared):
            self._state.update(parts[i])
        self._parts, self._hashed = parts, shared
        whole = self._state.copy()
        for i in range(shared, len(parts)):
            whole.update(parts[i])
        return whole.hexdigest()


WirePieces = Callable[[EpochHeader], Mapping[int, bytes]]
"""The wire bytes of history nodes (by seq) for requests with a header's wire,
as an audit rendered them (``SegmentRenderer.wire_pieces``)."""


class _Seeded(BodyCache):
    """A piece cache that first takes a node's bytes from ``known`` (what the
    audit encoded already: the very bytes the wire makes of the node)."""

    def __init__(self) -> None:
        super().__init__()
        self.known: Mapping[int, bytes] = {}
        self.seeded = 0

    def piece(self, seq: int | None, message: Mapping[str, Any], make: Callable[[], T]) -> T:
        found = self.known.get(seq) if seq is not None else None
        if found is None:
            return super().piece(seq, message, make)
        self.seeded += 1
        return found  # type: ignore[return-value]  # a wire piece: bytes


def body_digests(
    walked: Sequence[WalkedRequest], pieces: WirePieces | None = None
) -> dict[int, BodyDigest]:
    """Each request's :data:`BodyDigest`, by request index: its body as its
    wire encodes it (the bytes the request sent). ``pieces``: the nodes'
    wire bytes an audit of these requests encoded (not encoded again)."""
    cache, chained = _Seeded(), ChainedSha256()
    out: dict[int, BodyDigest] = {}
    for item in walked:
        request = item.request()
        if pieces is not None:
            cache.known = pieces(request.header)
        body = encode_wire_body(wire_for(request.config), request, cache=cache)
        out[item.index] = (body.size, chained.digest(body.parts))
    return out
