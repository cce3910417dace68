"""Sessions the server follows: loaded once, then extended by what is appended.

A :class:`LiveSession` holds one session as the store loads it (every event
validated, every digest checked) and a :class:`~tapelog.store.Follower` from
the seq after its last event (the store port's ``follow``: how it learns of a
flush is the backend's business). Each :meth:`LiveSession.poll` takes only
what was appended since and replays it into the same
:class:`~tapelog.log.Session`, through the same checks as loading: the line
must be the canonical bytes of its event, the event must fit the log
(``Session.replay``), and each ``log/digest`` must match the SHA-256 of every
byte before it. So a page or a live update never
re-reads the whole log, and shows nothing a full load would refuse: a line
that fails these checks breaks the live view, and the next page load reads
the log afresh and names the problem.

What a page needs beyond the events (the walk of its requests, the cache
audit, the report's parts of the windows last shown) is computed once per
length of the log (the audit of the log as loaded comes from the checkpoint
``tapelog cache`` or ``report`` left, when it covers those bytes, and resumes
from it when the log grew since; each later audit resumes from the one
before), so looking at a session again costs only what changed; the
checkpoint's digests of the last request bodies spare the first view encoding
them. The server
keeps the few sessions looked at last (:class:`LiveSessions`).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Final

from tapelog._errors import CorruptLogError
from tapelog.audit import CacheReport
from tapelog.audit._api import (
    BodyDigest,
    Checkpoint,
    ReportParts,
    ResumePoint,
    SegmentRenderer,
    WirePieces,
    resumed_audit,
)
from tapelog.log import decode
from tapelog.log._api import Event, Session, encode_trusted, event_from_json
from tapelog.request import walk_requests
from tapelog.request._api import WalkedRequest
from tapelog.serve._checkpoints import stored_checkpoint
from tapelog.serve._entry import activity
from tapelog.serve._index import store_label
from tapelog.serve._summary import FOLDED_TYPES, Summary, open_turn
from tapelog.store import SessionStore
from tapelog.store._api import read_session_bytes

__all__ = ["LiveSession", "LiveSessions"]

_KEPT: Final = 4
_PAGES_KEPT: Final = 2
_STATUS_EVERY_S: Final = 1.0


class LiveSession:
    """One followed session (see the module docstring). Use it under :attr:`lock`."""

    def __init__(self, store: SessionStore, session_id: str) -> None:
        self.id = session_id
        self.lock = threading.RLock()
        self._store = store
        data = store.session_bytes(session_id)  # not found: one sentence
        source = f"session {session_id} in the store {store_label(store)}"
        loaded, good = read_session_bytes(data, source=source)
        if loaded.session.id != session_id:
            raise CorruptLogError(
                f"{source}: line 1: the header names session {loaded.session.id!r}", line=1
            )
        self._session = loaded.session
        self.warnings = loaded.warnings
        # What each log/digest that arrives must match: the bytes stored before it.
        self._hasher = hashlib.sha256(memoryview(data)[:good])
        self._stored = good
        self._follower = store.follow(session_id, len(loaded.session))
        self._summary: Summary | None = None
        self._numbers: dict[int, int] = {}
        self._sent = 0
        self._walked: tuple[int, list[WalkedRequest]] | None = None
        self._audit: tuple[int, CacheReport] | None = None
        self._resume: ResumePoint | None = None
        self._kept: Checkpoint | None = None
        self._bodies: dict[int, BodyDigest] = {}
        self._pieces: tuple[int, WirePieces] | None = None
        kept = stored_checkpoint(store, session_id)
        whole = self._hasher.hexdigest() if good == len(data) else None  # hashed once
        if kept is not None and kept.covers(data, None, sha256=whole):
            self._audit = (len(loaded.session), kept.report())
            self._kept = kept  # its state resumes the audit once the log grows
            self._bodies = dict(kept.bodies)
        elif kept is not None:
            self._resume = kept.resume_point(data)
            if self._resume is not None:
                self._bodies = kept.bodies_through(self._resume[0].requests)
        self._status: tuple[float, bool] | None = None
        self._parts: dict[tuple[int, int], ReportParts] = {}

    @property
    def session(self) -> Session:
        return self._session

    def poll(self) -> int:
        """Replay what was appended since the last poll; how many events that was
        (:class:`~tapelog.StoreError` when the stored log no longer extends it)."""
        lines = self._follower.poll()
        for line in lines:
            self._replay(line)
        return len(lines)

    def close(self) -> None:
        """Stop following (the follower may hold a connection)."""
        self._follower.close()

    def _replay(self, line: bytes) -> None:
        session = self._session
        where = f"session {self.id}: seq {len(session)}"
        obj = decode(line, path=where)
        if encode_trusted(obj) != line:
            raise CorruptLogError(f"{where}: the line is not in canonical form")
        event = event_from_json(obj, where=where, decoded=True, line=line, canonical=True)
        if event.type == "log/digest" and event.seq >= (session.info.seed_length or 0):
            data = event.data
            if data["bytes"] != self._stored or data["sha256"] != self._hasher.hexdigest():
                raise CorruptLogError(
                    f"{where}: the digest does not match the bytes before it (the log was "
                    "changed); load the session again to see where"
                )
        session.replay(event)
        self._hasher.update(line + b"\n")
        self._stored += len(line) + 1
        if self._summary is not None:
            self._fold(event)

    # --- what pages and updates need ---------------------------------------------

    def summary(self) -> Summary:
        """The session's counters (as the index folds them), kept current by :meth:`poll`."""
        if self._summary is None:
            self._summary = Summary(id=self.id, events=0)
            for event in self.session.events:
                self._fold(event)
        return self._summary

    def _fold(self, event: Event) -> None:
        summary = self._summary
        assert summary is not None
        summary.events = event.seq + 1
        summary.last_time = event.time
        if event.type not in FOLDED_TYPES:
            return
        ended = summary.feed(event.type, event.seq, event.data)
        if ended is not None:
            if ended.sent:
                self._sent += 1
            else:
                self._numbers.pop(ended.start, None)
        if event.type == "step/start":
            self._numbers[event.seq] = self._sent + 1  # its number, if it is sent

    def request_number(self, seq: int) -> int | None:
        """The loop request index of the ``step/start`` at ``seq`` (``None``: none sent)."""
        self.summary()
        return self._numbers.get(seq)

    def walked(self) -> list[WalkedRequest]:
        """The session's loop requests (:func:`walk_requests`), once per length."""
        n = len(self.session)
        if self._walked is None or self._walked[0] != n:
            self._walked = (n, list(walk_requests(self.session)))
        return self._walked[1]

    def audit(self) -> CacheReport:
        """The cache audit of the session (:func:`cache_report`), once per length."""
        n = len(self.session)
        if self._audit is None or self._audit[0] != n:
            kept, self._kept = self._kept, None
            if kept is not None:  # it covers a prefix of the log as polled
                state = kept.state()
                self._resume = None if state is None else (state, kept.rows)
                # Only the requests the grown log surely shares (its last step may not be sent).
                self._bodies = {} if state is None else kept.bodies_through(state.requests)
            renderer = SegmentRenderer()  # its nodes' wire bytes make the page's bodies too
            walked = self.walked()
            report, state = resumed_audit(
                self.session, self._resume, walked=walked, renderer=renderer
            )
            self._audit, self._resume = (n, report), (state, report.requests)
            self._pieces = (n, renderer.wire_pieces)
        return self._audit[1]

    def pieces(self) -> WirePieces | None:
        """The wire bytes of the nodes the last audit of this length rendered
        (``None``: the audit came from a checkpoint, or the log grew since)."""
        kept = self._pieces
        return kept[1] if kept is not None and kept[0] == len(self.session) else None

    def bodies(self) -> dict[int, BodyDigest]:
        """The body digests of requests the checkpoint it was loaded with knew
        (and this log surely shares): a page encodes only the others."""
        return self._bodies

    def parts(self, window: int, make: Callable[[], ReportParts]) -> ReportParts:
        """The report's parts of the page showing the window starting at request
        ``window``, made once per length of the log (the last two are kept)."""
        key = (len(self.session), window)
        parts = self._parts.get(key)
        if parts is None:
            parts = self._parts[key] = make()
            while len(self._parts) > _PAGES_KEPT:
                del self._parts[next(iter(self._parts))]
        return parts

    def status(self) -> str:
        """:func:`~tapelog.serve._entry.activity` (whether a writer holds it is
        asked of the store at most once a second)."""
        now = time.monotonic()
        if self._status is None or now - self._status[0] > _STATUS_EVERY_S:
            self._status = (now, self._store.active(self.id))
        # A first view needs no fold of every event: the turn's state from the end.
        turn = open_turn(self.session.events) if self._summary is None else self._summary.open_turn
        return activity(self._status[1], turn)

    def events_after(self, seq: int, limit: int) -> Sequence[Event]:
        """Up to ``limit`` events after ``seq``."""
        events = self.session.events
        return events[seq + 1 : min(seq + 1 + limit, len(events))]


class LiveSessions:
    """The sessions looked at last, kept loaded (at most four)."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, LiveSession] = OrderedDict()
        self._loading: dict[str, threading.Lock] = {}

    def get(self, session_id: str) -> LiveSession:
        """The session, loaded if it is not kept, brought up to date."""
        with self._lock:
            gate = self._loading.setdefault(session_id, threading.Lock())
        with gate:  # one load per session at a time
            with self._lock:
                live = self._kept.get(session_id)
                if live is not None:
                    self._kept.move_to_end(session_id)
            if live is not None:
                with live.lock:
                    try:
                        live.poll()
                        return live
                    except Exception:
                        self.forget(live)
            live = LiveSession(self._store, session_id)
            with self._lock:
                self._kept[session_id] = live
                while len(self._kept) > _KEPT:
                    # Not closed: a live update may still follow it; its follower
                    # (and any connection) goes with the last reference.
                    self._kept.popitem(last=False)
            return live

    def forget(self, live: LiveSession) -> None:
        """Drop ``live`` (its log broke or changed): the next :meth:`get` loads it anew."""
        with self._lock:
            if self._kept.get(live.id) is live:
                del self._kept[live.id]
        with live.lock:
            live.close()

    def close(self) -> None:
        """Stop following every kept session."""
        with self._lock:
            kept, self._kept = list(self._kept.values()), OrderedDict()
        for live in kept:
            with live.lock:
                live.close()
