"""Which session a request continues: the index of conversation points.

Every time a proxied turn ends, its session's history (the projected messages,
what the next request of that conversation must start with) is recorded as a
*point*: the digest of its loose-key chain (``_keys``), its length and the
seq of the ``turn/end`` there. A session's newest point is its *end*.
:meth:`SessionIndex.match` takes the chain of a request's messages (one pass)
and decides, in this order:

1. **extend**: the longest prefix of the request that is some session's end:
   the request continues that conversation. When several sessions end there
   (two clients sent the same conversation) the idle one that was active
   last wins; when all of them are busy answering another request, the
   request is a **fork** of one of them at that point, so two requests in
   flight never share a session;
2. **retry**: the request is a session's end without its last answer, and the
   session is idle: the client sent its last request again (its answer was
   lost on the way: a replica died after logging it, a timeout). The
   conversation continues in that session; the old answer is replaced (a
   logged replace) rather than forked off, so a retry on another replica
   stays in the one session. An identical resend to get another answer looks
   the same on the wire and is logged the same way. Not for a session's
   first exchange: two clients that open with the same message (a "hello")
   are new sessions, as before;
3. **edit**: the request holds, at the same position, the last answer of a
   session that ended with an assistant message (or one of that answer's
   other choices, ``n`` > 1): the conversation continues, but the client
   changed something before it (a rewritten message, an injected timestamp,
   the choice it kept). The changes become a logged replace;
4. **fork**: the longest prefix of the request that is an earlier point of a
   session (a regenerated answer, a branch): a new session seeded with the
   log up to that point's ``turn/end``;
5. **new**: a new session.

The points come from the store (``tapelog.store._points``): a replica records
each turn's point there and folds every record it has not seen into this
index before it matches a request (``_sessions``), so every replica on one
store knows every conversation. Matching costs one dictionary lookup per
message of the request. Points are
kept per turn (not per message), so a request that branches off in the
middle of a turn (before its answer) matches the point before that turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from tapelog.store._api import PointRecord

__all__ = ["Match", "Point", "SessionIndex"]


@dataclass(frozen=True, slots=True)
class Point:
    """A session's history at a ``turn/end``: ``length`` projected messages."""

    session_id: str
    length: int
    seq: int


@dataclass(frozen=True, slots=True)
class Match:
    """What :meth:`SessionIndex.match` decided; ``point`` is the session's end
    (extend, retry, edit) or where to fork (fork); both ``None`` for a new session."""

    kind: Literal["extend", "retry", "edit", "fork", "new"]
    point: Point | None = None


class SessionIndex:
    """Points of every known session, keyed by the digest of their history."""

    def __init__(self) -> None:
        self._points: dict[bytes, dict[str, Point]] = {}
        # each session's end, its anchor keys (the answer's, its other choices')
        # and its retry digest
        self._ends: dict[str, tuple[Point, tuple[bytes, ...], bytes | None]] = {}
        self._anchors: dict[tuple[bytes, int], dict[str, None]] = {}
        self._retries: dict[tuple[bytes, int], dict[str, None]] = {}
        self._digests: dict[str, list[bytes]] = {}  # what to forget with a session
        self._active: dict[str, int] = {}
        self._tick = 0
        # upstream response id -> the session, turn and seq that logged it (Responses API)
        self._responses: dict[str, tuple[str, int, int]] = {}

    def __len__(self) -> int:
        return len(self._ends)

    def end(self, session_id: str) -> Point | None:
        """The session's newest point (``None``: the session has none)."""
        found = self._ends.get(session_id)
        return found[0] if found is not None else None

    def response(self, response_id: str) -> tuple[str, int] | None:
        """The session and turn that logged the upstream's response ``response_id``
        (``None``: no session this index knows)."""
        found = self._responses.get(response_id)
        return None if found is None else found[:2]

    def continued(self, response_id: str) -> Point | None:
        """The end of the session whose last turn logged ``response_id`` (``None``:
        no session ends with that response): a request that continues it by
        ``previous_response_id`` continues that conversation."""
        found = self._responses.get(response_id)
        if found is None:
            return None
        end = self.end(found[0])
        return end if end is not None and end.seq == found[2] else None

    def apply(self, record: PointRecord) -> None:
        """A turn of ``record.session_id`` ended at ``record.seq`` with a history of
        ``record.length`` messages whose chain ends with ``record.digest``;
        ``record.anchor`` is the loose key of its last message when that is an
        assistant message (what an edited continuation still holds), and
        ``record.alternatives`` the keys of that answer's other choices. Records are
        applied in the store's order, so every replica's index agrees."""
        session_id = record.session_id
        if record.response_id is not None and record.turn is not None:
            self._responses[record.response_id] = (session_id, record.turn, record.seq)
        self._tick += 1
        self._active[session_id] = self._tick
        old = self._ends.pop(session_id, None)
        if old is not None:
            point, anchors, retry = old
            for anchor in anchors:
                _drop(self._anchors, anchor, point.length, session_id)
            _drop(self._retries, retry, point.length - 1, session_id)
        if not record.length:
            return
        point = Point(session_id, record.length, record.seq)
        digest = record.digest
        self._points.setdefault(digest, {})[session_id] = point
        self._digests.setdefault(session_id, []).append(digest)
        anchors = (record.anchor, *record.alternatives) if record.anchor is not None else ()
        self._ends[session_id] = (point, anchors, record.retry)
        for key in anchors:
            self._anchors.setdefault((key, point.length), {})[session_id] = None
        if record.retry is not None:
            self._retries.setdefault((record.retry, point.length - 1), {})[session_id] = None

    def forget(self, session_id: str) -> None:
        """Drop every point of ``session_id`` (a session that can no longer be written)."""
        self.apply(PointRecord(session_id, b"", 0, -1))
        for digest in self._digests.pop(session_id, ()):
            holders = self._points.get(digest)
            if holders is not None:
                holders.pop(session_id, None)
                if not holders:
                    del self._points[digest]
        self._active.pop(session_id, None)
        for response_id in [r for r, found in self._responses.items() if found[0] == session_id]:
            del self._responses[response_id]

    def _recent(self, session_id: str) -> int:
        return self._active.get(session_id, 0)

    def match(
        self,
        chain: Sequence[bytes],
        keys: Sequence[bytes],
        busy: Callable[[str], bool],
        fits: Callable[[str], bool] | None = None,
    ) -> Match:
        """Where a request whose message chain is ``chain`` (keys ``keys``) belongs;
        ``busy`` says which sessions are answering a request now. ``fits`` says
        which sessions are the request's own agent's (``_identity``): when the
        match is another agent's, the idle session of its own agent that ends
        at the longest shorter prefix is extended instead (an agent that takes
        its conversation back after a handoff); without one, the match stands."""
        found = self._match(chain, keys, busy)
        point = found.point
        if fits is None or point is None or found.kind not in ("extend", "fork"):
            return found
        if fits(point.session_id):
            return found
        for i in range(min(point.length, len(chain)) - 1, 0, -1):
            points = self._points.get(chain[i - 1])
            own = [
                p
                for sid, p in (points or {}).items()
                if self.end(sid) == p and not busy(sid) and fits(sid)
            ]
            if own:
                return Match("extend", max(own, key=lambda p: self._recent(p.session_id)))
        return found

    def _match(
        self, chain: Sequence[bytes], keys: Sequence[bytes], busy: Callable[[str], bool]
    ) -> Match:
        fork: Point | None = None
        for i in range(len(chain), 0, -1):
            points = self._points.get(chain[i - 1])
            if not points:
                continue
            ends = [p for sid, p in points.items() if self.end(sid) == p]
            if ends:
                best = max(ends, key=lambda p: (not busy(p.session_id), self._recent(p.session_id)))
                return Match("fork" if busy(best.session_id) else "extend", best)
            fork = max(points.values(), key=lambda p: (self._recent(p.session_id), p.seq))
            break
        if chain:
            holders = self._retries.get((chain[-1], len(chain)))
            free = [sid for sid in holders or () if not busy(sid)]
            if free:
                return Match("retry", self._ends[max(free, key=self._recent)][0])
        for m in range(len(keys), 0, -1):
            holders = self._anchors.get((keys[m - 1], m))
            if holders:
                free = [sid for sid in holders if not busy(sid)]
                if free:
                    sid = max(free, key=self._recent)
                    return Match("edit", self._ends[sid][0])
        if fork is not None:
            return Match("fork", fork)
        return Match("new")


def _drop(
    table: dict[tuple[bytes, int], dict[str, None]], key: bytes | None, length: int, sid: str
) -> None:
    """Remove ``sid`` from ``table[(key, length)]`` (the entry too, once empty)."""
    if key is None:
        return
    holders = table.get((key, length))
    if holders is not None:
        holders.pop(sid, None)
        if not holders:
            del table[(key, length)]
