"""Body assembly from pre-encoded pieces, and the per-node piece cache.

A wire body is canonical JSON (``tapelog.log.encode``: compact, key order as
written). Compact JSON composes: the encoding of an object is ``{``, each
member as ``"key":value`` joined by ``,``, then ``}``. So a body can be built by
concatenating the bytes of its parts, and the bytes of each history message can
be computed once per surface node and reused on every later step (docs/architecture.md):
a step costs what is new, not a re-encode of the whole history.

:class:`BodyCache` holds those per-node pieces for one wire configuration. It
is keyed by event seq and checks that the message object is the one it saw;
a new ``replace_generation`` (compaction, trimming) or another wire
configuration clears it. The cache never changes the bytes: the tests prove
that cached assembly equals a straight encode of the same body object.

A cached piece lives as long as its node, so what it costs in memory is paid
once per history message. ``orjson.dumps`` returns bytes whose buffer is
sized for the worst case, not the result (orjson 3.13: 4 KB for a 70-byte
message, about 8x the length for a long string), and never shrinks it; a
piece is stored as an exact-size copy of the same bytes (:func:`exact_size`).

The body is never joined on the loop's way to the edge: a wire's parts become
a :class:`WireBody` (immutable parts, sent in ~64 KB chunks), and the history a
session keeps appending to is a :class:`ByteRun`, whose old parts are sealed
segments the next step reuses as the same objects. A step then copies what is
new, and the checker compares what is new (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar, cast

from tapelog.log import encode
from tapelog.log._api import History

__all__ = [
    "CHUNK_BYTES",
    "SEGMENT_BYTES",
    "SEGMENT_PARTS",
    "BodyCache",
    "ByteRun",
    "Parts",
    "WireBody",
    "exact_size",
    "json_array",
    "json_object",
    "json_object_parts",
    "node_seq_list",
    "object_parts",
]

T = TypeVar("T")

# Pieces of nodes that left the surface are dropped once the cache holds this
# many more entries than the current request has nodes.
_SLACK = 64


def json_object(members: Iterable[tuple[str, bytes]]) -> bytes:
    """Canonical bytes of an object whose member values are already encoded."""
    return b"{" + b",".join(encode(key) + b":" + value for key, value in members) + b"}"


def json_array(items: Iterable[bytes]) -> bytes:
    """Canonical bytes of an array whose items are already encoded."""
    return b"[" + b",".join(items) + b"]"


Parts = list[bytes]
"""Byte parts whose concatenation is a body (``b"".join(parts)``)."""

CHUNK_BYTES: Final = 64 * 1024
"""About how much of a body :meth:`WireBody.chunks` hands the socket at a time."""

SEGMENT_BYTES: Final = 64 * 1024
SEGMENT_PARTS: Final = 128
"""A :class:`ByteRun` seals its open parts into one segment at this many bytes or parts."""


class WireBody:
    """An HTTP body as the immutable byte parts a wire assembled, in order.

    The loop hands this to the edge instead of one joined ``bytes``: joining a
    body copies all of it, every step, and a long session's body is megabytes.
    The parts are the body (``bytes(body) == b"".join(body.parts)``); a client
    streams them (:meth:`chunks`) with a ``Content-Length`` of ``len(body)``,
    so the provider receives exactly those bytes. Code that needs one bytes
    object (a local model, a recorder, a diff) calls ``bytes(body)``: joined
    once, then kept. Every part is ``bytes`` (a mutable part is copied), so a
    part seen twice as the same object holds the same bytes: the checker
    skips what it verified before by identity.
    """

    __slots__ = ("_joined", "parts", "size")

    def __init__(self, parts: Iterable[bytes | bytearray | memoryview]) -> None:
        given = tuple(parts)
        if set(map(type, given)) - {bytes}:  # (C-level: a wire's parts are all bytes)
            given = tuple(map(bytes, given))  # (bytes(b) is b itself for a bytes b)
        self.parts = cast("tuple[bytes, ...]", given)
        self.size = sum(map(len, given))
        self._joined: bytes | None = None

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        joined = self._joined
        if joined is None:
            parts = self.parts
            joined = parts[0] if len(parts) == 1 else b"".join(parts)
            self._joined = joined
        return joined

    def __repr__(self) -> str:
        return f"WireBody({len(self.parts)} parts, {self.size} bytes)"

    def chunks(self, size: int = CHUNK_BYTES) -> Iterator[bytes]:
        """The body in pieces for a socket: runs of small parts joined until
        they reach ``size`` bytes, a part of ``size`` or more as it is (no copy).
        Each call starts again from the first byte (a retry resends the body)."""
        group: list[bytes] = []
        held = 0
        for part in self.parts:
            if not part:
                continue
            if len(part) >= size:
                if group:
                    yield b"".join(group)
                    group, held = [], 0
                yield part
                continue
            group.append(part)
            held += len(part)
            if held >= size:
                yield b"".join(group)
                group, held = [], 0
        if group:
            yield b"".join(group)


class ByteRun:
    """The inside of a JSON array that only grows: items with ``b","`` between
    them, kept as immutable parts.

    A wire's history bytes for one session: each step adds its new messages'
    pieces and :meth:`parts` snapshots the whole, old parts first. Open parts
    are sealed into one exact-size segment once they reach
    :data:`SEGMENT_BYTES` or :data:`SEGMENT_PARTS` (an item of
    :data:`SEGMENT_BYTES` or more is a segment alone, not copied), so a
    snapshot is a few dozen parts for megabytes of history, and the segments
    of earlier steps are the same objects in every later snapshot. Nothing
    already added is ever changed: a snapshot taken earlier stays the bytes it was.
    """

    __slots__ = ("_open", "_open_bytes", "_sealed")

    def __init__(self) -> None:
        self._sealed: list[bytes] = []
        self._open: list[bytes] = []
        self._open_bytes = 0

    def __bool__(self) -> bool:
        return bool(self._sealed or self._open)

    def add(self, item: bytes) -> None:
        """Append one array item (a comma goes before it unless it is the first)."""
        if type(item) is not bytes:
            item = bytes(item)
        if self._sealed or self._open:
            self._open.append(b",")
        if len(item) >= SEGMENT_BYTES:
            self._seal()
            self._sealed.append(item)
            return
        self._open.append(item)
        self._open_bytes += len(item)
        if self._open_bytes >= SEGMENT_BYTES or len(self._open) >= SEGMENT_PARTS:
            self._seal()

    def _seal(self) -> None:
        opened = self._open
        if opened:
            self._sealed.append(opened[0] if len(opened) == 1 else b"".join(opened))
            self._open, self._open_bytes = [], 0

    def parts(self) -> Parts:
        """The items so far, as parts (a new list: later adds leave it alone)."""
        return [*self._sealed, *self._open]

    def adopt(self, equal: Mapping[int, bytes]) -> None:
        """Hold ``equal[id(part)]`` in place of each part it names: an object
        with the same bytes (the checker's shadow keeps the sent parts it found
        equal, so it holds no copy of its own and the next comparison skips them)."""
        if not equal:
            return
        # Segments sealed before the last adoption were adopted then: only the
        # newest, at the end, can be named (a check adopts every part it compared).
        sealed = self._sealed
        i = len(sealed)
        while i and id(sealed[i - 1]) in equal:
            i -= 1
        sealed[i:] = [equal[id(part)] for part in sealed[i:]]
        get = equal.get
        self._open = [get(id(part), part) for part in self._open]


def object_parts(members: Iterable[tuple[str, bytes | Parts]]) -> Parts:
    """The parts of a JSON object whose member values are encoded already; a
    value may itself be a list of parts (kept as they are, not joined)."""
    parts: Parts = [b"{"]
    for key, value in members:
        if len(parts) > 1:
            parts.append(b",")
        parts.append(encode(key) + b":")
        if isinstance(value, list):
            parts.extend(value)
        else:
            parts.append(value)
    parts.append(b"}")
    return parts


def json_object_parts(members: Iterable[tuple[str, bytes | Parts]]) -> bytes:
    """Like :func:`json_object`, but a member value may be a list of byte parts
    (joined as they are). The body is built with one copy, however large."""
    return b"".join(object_parts(members))


def exact_size(value: Any) -> Any:
    """``value`` with every ``bytes`` in it (itself, or inside nested tuples)
    replaced by an exact-size copy of the same bytes; anything else is kept.

    Kept pieces are small and many: an ``orjson.dumps`` result of 70 bytes
    holds a 4 KB buffer (``sys.getsizeof`` reports only the length), which is
    most of what a history message would cost. ``memoryview(b).tobytes()``
    allocates exactly ``len(b)`` bytes (``bytes(b)`` would return ``b``
    itself); the copy is one memcpy, paid once per node.
    """
    if type(value) is bytes:
        return memoryview(value).tobytes()
    if type(value) is tuple:
        return tuple(exact_size(item) for item in value)
    return value


def node_seq_list(
    messages: Sequence[Any], node_seqs: Sequence[int | None]
) -> tuple[int | None, ...]:
    """The node seq of each message (``None`` for prefix messages or when unknown).

    ``LlmRequest.node_seqs`` is aligned with ``messages`` (``None`` for prefix
    messages); a tuple that only covers the history is aligned from the end.
    Anything else is ignored: the body is then encoded without the cache.
    The request's own tuple is returned as it is (no copy of the history's seqs).
    """
    if len(node_seqs) == len(messages):
        return tuple(node_seqs)
    if 0 < len(node_seqs) < len(messages):
        return (None,) * (len(messages) - len(node_seqs)) + tuple(node_seqs)
    return (None,) * len(messages)


def _anonymous(
    keys: tuple[int | None, ...],
    messages: Sequence[Mapping[str, Any]],
    start: int = 0,
    known: tuple[tuple[int, Mapping[str, Any]], ...] = (),
) -> tuple[tuple[int, Mapping[str, Any]], ...]:
    """The seq-less messages with their positions: ``known`` ones (those before
    ``start``, found earlier), then any in ``keys[start:]``."""
    found = [(i, messages[i]) for i in range(start, len(keys)) if keys[i] is None]
    return (*known, *found) if found else known


@dataclass(frozen=True, slots=True)
class _Joined:
    """The bytes of a run's messages (the OpenAI and Responses wires' run state)."""

    blob: ByteRun


@dataclass(frozen=True, slots=True)
class _Run:
    """What a wire kept of a request (``state``), and the messages it was made of."""

    scope: str | None
    keys: tuple[int | None, ...]
    anonymous: tuple[tuple[int, Mapping[str, Any]], ...]
    state: object
    history: History | None = None  # the request's history view, if it had one
    lead: int = 0  # len(keys) - len(history): where the history's seqs sit in keys


class BodyCache:
    """Per-surface-node wire pieces for one wire configuration.

    Give one cache to one adapter (or loop) and pass it to
    ``wire.encode_body(request, cache=cache)``; call :meth:`sync` with the
    session's ``replace_generation`` when it is known. Without a cache the
    wire encodes everything, with the same bytes.
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[Mapping[str, Any], Any]] = {}
        self._run: _Run | None = None
        self._matched: _Run | None = None  # the run previous() just matched
        self._head: tuple[bytes, Any] | None = None
        self._generation: int | None = None
        self._key: object = None
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        self._run = self._matched = None
        self._head = None

    def head(self, key: bytes, make: Callable[[], T]) -> T:
        """What a wire encodes from the header alone (tools, system, config
        fields), for the header whose canonical bytes are ``key``: made once
        while the header stays the same, not re-encoded every step."""
        head = self._head
        if head is not None and head[0] == key:
            value: T = head[1]
            return value
        made = make()
        self._head = (key, made)
        return made

    def sync(self, generation: int) -> None:
        """Forget every piece when the surface's replace generation moved."""
        if generation != self._generation:
            self.clear()
            self._generation = generation

    def bind(self, key: object) -> None:
        """Use the cache for the wire configuration ``key`` (another key clears it)."""
        if key != self._key:
            self.clear()
            self._key = key

    def piece(self, seq: int | None, message: Mapping[str, Any], make: Callable[[], T]) -> T:
        """The cached piece of node ``seq``, or ``make()`` stored for next time.

        A node whose message object differs from the one cached (neither the
        same object nor equal) is re-encoded: the cache can go stale only by
        being wrong about identity, and equality guards that. What is stored
        (and returned) is :func:`exact_size` of ``make()``: the same bytes, in
        exact-size buffers.
        """
        if seq is None:
            return make()
        entry = self._entries.get(seq)
        if entry is not None and (entry[0] is message or entry[0] == message):
            self.hits += 1
            value: T = entry[1]
            return value
        self.misses += 1
        made: T = exact_size(make())  # kept as long as the node: no slack buffers
        self._entries[seq] = (message, made)
        return made

    def previous(
        self,
        keys: tuple[int | None, ...],
        messages: Sequence[Mapping[str, Any]],
        *,
        scope: str | None,
        history: History | None = None,
    ) -> tuple[int, object] | None:
        """``(n, state)``: what :meth:`remember` kept of the previous request, if
        its ``n`` messages lead this one's; else ``None``.

        The match is exact: within one session (``scope``, the session id) a
        node seq names one immutable event and any replace puts a new seq in
        the list; the few seq-less messages (the header's prefix) are compared
        by value. Without a scope nothing matches. ``history`` is the request's
        ``LlmRequest.history``: when both requests have one at the same place in
        ``keys`` and this one :meth:`History.extends` the other (the same
        append-only lists), their seqs agree without comparing them one by one
        (which would touch every seq of a long history, every step).
        """
        run = self._run
        self._matched = None
        if scope is None or run is None or run.scope != scope or len(run.keys) > len(keys):
            return None
        extends = (
            history is not None
            and run.history is not None
            and len(keys) - len(history) == run.lead
            and history.extends(run.history)
        )
        if not extends and keys[: len(run.keys)] != run.keys:
            return None
        if not all(messages[i] is m or messages[i] == m for i, m in run.anonymous):
            return None
        self._matched = run
        return len(run.keys), run.state

    def remember(
        self,
        keys: tuple[int | None, ...],
        messages: Sequence[Mapping[str, Any]],
        state: object,
        *,
        scope: str | None,
        history: History | None = None,
    ) -> None:
        """Keep ``state`` (the wire's own) for the next request of this session
        (``history``: as for :meth:`previous`).

        When :meth:`previous` just matched the run this request extends, only
        the new keys are searched for seq-less messages.
        """
        matched, self._matched = self._matched, None
        if matched is not None and matched.scope == scope and len(matched.keys) <= len(keys):
            anonymous = _anonymous(keys, messages, len(matched.keys), matched.anonymous)
        else:
            anonymous = _anonymous(keys, messages)
        lead = len(keys) - len(history) if history is not None else 0
        self._run = _Run(scope, keys, anonymous, state, history, lead)

    def joined(
        self,
        seqs: Sequence[int | None],
        messages: Sequence[Mapping[str, Any]],
        piece: Callable[[int], bytes],
        *,
        scope: str | None,
        history: History | None = None,
    ) -> Parts:
        """The bytes of every message with ``b","`` between them (as parts),
        reusing what the previous call kept for the leading run of messages
        (``history``: the request's, see :meth:`previous`).

        A step usually appends to the history, so the parts of the history up
        to the previous request are reused (see :meth:`previous`) and only the
        new messages are looked up and added to the run (:class:`ByteRun`):
        the per-step cost is the new messages, not the history. The parts are
        immutable; the previous ones stay the same objects.
        """
        keys = tuple(seqs)
        start, run = 0, None
        previous = self.previous(keys, messages, scope=scope, history=history)
        if previous is not None and isinstance(previous[1], _Joined):
            start, run = previous[0], previous[1].blob
        if run is None:
            run = ByteRun()
        for i in range(start, len(keys)):
            made = piece(i)
            if made:  # (a message may have nothing to send on this wire)
                run.add(made)
        self.remember(keys, messages, _Joined(run), scope=scope, history=history)
        return run.parts()

    def adopt(self, equal: Mapping[int, bytes]) -> None:
        """Let the run state's :class:`ByteRun` (a wire keeps it as ``blob``)
        hold the given equal objects in place of its parts (:meth:`ByteRun.adopt`)."""
        blob = getattr(self._run.state, "blob", None) if self._run is not None else None
        if isinstance(blob, ByteRun):
            blob.adopt(equal)

    def prune(self, live: Sequence[int | None]) -> None:
        """Drop pieces of nodes that are no longer in requests, when many piled up."""
        if len(self._entries) <= len(live) + _SLACK:
            return
        keep = {seq for seq in live if seq is not None}
        if len(self._entries) > len(keep) + _SLACK:
            for seq in [s for s in self._entries if s not in keep]:
                del self._entries[seq]
