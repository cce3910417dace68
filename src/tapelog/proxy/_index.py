"""Which session a request continues: the in-memory index of conversation points.

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
2. **edit**: the request holds, at the same position, the last answer of a
   session that ended with an assistant message (or one of that answer's
   other choices, ``n`` > 1): the conversation continues, but the client
   changed something before it (a rewritten message, an injected timestamp,
   the choice it kept). The changes become a logged replace;
3. **fork**: the longest prefix of the request that is an earlier point of a
   session (a regenerated answer, a branch): a new session seeded with the
   log up to that point's ``turn/end``;
4. **new**: a new session.

Matching costs one dictionary lookup per message of the request. Points are
kept per turn (not per message), so a request that branches off in the
middle of a turn (before its answer) matches the point before that turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

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
    (extend, edit) or where to fork (fork); both ``None`` for a new session."""

    kind: Literal["extend", "edit", "fork", "new"]
    point: Point | None = None


class SessionIndex:
    """Points of every known session, keyed by the digest of their history."""

    def __init__(self) -> None:
        self._points: dict[bytes, dict[str, Point]] = {}
        self._ends: dict[str, tuple[Point, tuple[bytes, ...]]] = {}  # end and its anchor keys
        self._anchors: dict[tuple[bytes, int], dict[str, None]] = {}
        self._digests: dict[str, list[bytes]] = {}  # what to forget with a session
        self._active: dict[str, int] = {}
        self._tick = 0

    def __len__(self) -> int:
        return len(self._ends)

    def end(self, session_id: str) -> Point | None:
        """The session's newest point (``None``: the session has none)."""
        found = self._ends.get(session_id)
        return found[0] if found is not None else None

    def record(
        self,
        session_id: str,
        chain: Sequence[bytes],
        seq: int,
        *,
        anchor: bytes | None,
        alternatives: Sequence[bytes] = (),
    ) -> None:
        """A turn of ``session_id`` ended at ``seq`` with the history ``chain``
        names; ``anchor`` is the loose key of its last message when that is an
        assistant message (what an edited continuation still holds), and
        ``alternatives`` the keys of that answer's other choices (``n`` > 1)."""
        self._tick += 1
        self._active[session_id] = self._tick
        old_point, old_keys = self._ends.pop(session_id, (None, ()))
        for key in old_keys:
            assert old_point is not None
            holders = self._anchors.get((key, old_point.length))
            if holders is not None:
                holders.pop(session_id, None)
                if not holders:
                    del self._anchors[(key, old_point.length)]
        if not chain:
            return
        point = Point(session_id, len(chain), seq)
        digest = chain[-1]
        self._points.setdefault(digest, {})[session_id] = point
        self._digests.setdefault(session_id, []).append(digest)
        anchors = (anchor, *alternatives) if anchor is not None else ()
        self._ends[session_id] = (point, anchors)
        for key in anchors:
            self._anchors.setdefault((key, point.length), {})[session_id] = None

    def forget(self, session_id: str) -> None:
        """Drop every point of ``session_id`` (a session that can no longer be written)."""
        self.record(session_id, (), -1, anchor=None)
        for digest in self._digests.pop(session_id, ()):
            holders = self._points.get(digest)
            if holders is not None:
                holders.pop(session_id, None)
                if not holders:
                    del self._points[digest]
        self._active.pop(session_id, None)

    def _recent(self, session_id: str) -> int:
        return self._active.get(session_id, 0)

    def match(
        self, chain: Sequence[bytes], keys: Sequence[bytes], busy: Callable[[str], bool]
    ) -> Match:
        """Where a request whose message chain is ``chain`` (keys ``keys``) belongs;
        ``busy`` says which sessions are answering a request now."""
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
