"""HeaderRecorder: the one writer of request-header events.

A loop instance owns one recorder. Its first use writes a full snapshot, which
anchors the process boundary (``initial`` on an empty log, ``resume`` when the
log already has a header); afterwards it writes nothing while the header is
unchanged, a delta when the delta round-trips, and a ``fallback`` snapshot when
it does not.
"""

from __future__ import annotations

from tapelog.log._events import Event
from tapelog.log._header import EpochHeader, apply_header_delta, diff_header
from tapelog.log._session import Session

__all__ = ["HeaderRecorder"]


class HeaderRecorder:
    """Logs request headers into a session, as snapshots or deltas."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._anchored = False

    @property
    def anchored(self) -> bool:
        """Whether this recorder has written its first snapshot."""
        return self._anchored

    def record(self, header: EpochHeader) -> Event | None:
        """Log ``header`` if needed; return the event written, if any."""
        session = self._session
        current = session.header
        if not self._anchored:
            reason = "initial" if current is None else "resume"
            event = session.append("request/header", {"header": header.to_json(), "reason": reason})
            self._anchored = True
            return event
        assert current is not None, "an anchored recorder always has a folded header"
        delta = diff_header(current, header)
        if delta is None:
            return None
        if apply_header_delta(current, delta).canonical_bytes() == header.canonical_bytes():
            return session.append("request/header-delta", delta)
        return session.append("request/header", {"header": header.to_json(), "reason": "fallback"})
