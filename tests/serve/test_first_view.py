"""A session's first view in ``tapelog serve`` is the same page with the
checkpoint ``tapelog cache`` left (of exactly the log's bytes, or of a shorter
log that grew since) as without one; the checkpoint only spares work: the
window's request bodies it knows are not encoded again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from audit._growing import Growing, TurnPlan, grow
from tapelog.audit._checkpoint import BODIES_KEPT
from tapelog.cli import cli
from tapelog.serve._live import LiveSession
from tapelog.serve._session_page import WINDOW, session_html
from tapelog.serve._summary import Summary, open_turn
from tapelog.store import JsonlStore

# Three requests a turn (two tool rounds and the answer): two windows' worth.
_PLANS = [TurnPlan(rounds=2, low_usage=i % 7 == 3, idle_before=i == 9) for i in range(20)]


class _Encoded:
    """Counts the request bodies a page encodes (those no checkpoint knew)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import tapelog.audit._report_html as module

        self.count = 0
        real = module.body_digests

        def counted(walked: Sequence[Any], pieces: Any = None) -> Any:
            self.count += len(walked)
            return real(walked, pieces)

        monkeypatch.setattr(module, "body_digests", counted)


def _cache(root: Path, sid: str) -> None:
    """``tapelog cache``, which leaves the checkpoint beside the log."""
    result = CliRunner().invoke(cli, ["cache", sid, "--store", str(root), "--json"])
    assert result.exit_code == 0, result.output


def _page(live: LiveSession, params: dict[str, str]) -> str:
    with live.lock:
        return session_html(
            live, params, status="idle", css="", live_script="", parents={}, children={}
        )


def _pages(root: Path, sid: str) -> dict[str, str]:
    """The first view of each window the tests look at, in a new process's server."""
    live = LiveSession(JsonlStore(root), sid)
    try:
        return {
            name: _page(live, params) for name, params in (("last", {}), ("first", {"req": "1"}))
        }
    finally:
        live.close()


def test_the_serve_window_is_within_the_bodies_a_checkpoint_keeps() -> None:
    assert WINDOW <= BODIES_KEPT


def test_the_first_view_is_the_same_with_a_checkpoint_of_the_log_a_grown_log_and_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    growing = Growing(tmp_path)
    try:
        grow(growing, _PLANS)
        checkpoint = growing.path.with_suffix(".audit")
        without = _pages(tmp_path, growing.sid)
        assert 'id="req-60"' in without["last"]
        assert 'id="req-1"' in without["first"]

        _cache(tmp_path, growing.sid)
        assert checkpoint.is_file()
        encoded = _Encoded(monkeypatch)
        assert _pages(tmp_path, growing.sid) == without
        # The checkpoint knows the last fifty bodies: the last window's ten and
        # the first window's requests 11-50; only requests 1-10 are encoded.
        assert encoded.count == 60 - BODIES_KEPT

        # The log grows by one turn: the checkpoint covers a prefix of it.
        grow(growing, [TurnPlan(rounds=2, flush_mid_step=True)])
        encoded.count = 0
        grown = _pages(tmp_path, growing.sid)
        from_grown = encoded.count
        checkpoint.unlink()
        assert grown == _pages(tmp_path, growing.sid)
        assert 'id="req-63"' in grown["last"]
        # Encoded: the three new requests, the last one the checkpoint covered
        # (its resume point stops before the log's last step), and requests 1-10.
        assert from_grown == 3 + 1 + (60 - BODIES_KEPT)
    finally:
        growing.close()


def test_a_live_view_loaded_with_a_checkpoint_shows_the_grown_log_as_a_fresh_load_does(
    tmp_path: Path,
) -> None:
    """A page of a session that grew after it was loaded with the checkpoint of
    its bytes is the page of a fresh load (the digests of a request the log no
    longer surely shares, whose step was open, are not used)."""
    growing = Growing(tmp_path)
    try:
        grow(growing, [*_PLANS[:4], TurnPlan(rounds=1, flush_mid_step=True)])
        _cache(tmp_path, growing.sid)
        live = LiveSession(JsonlStore(tmp_path), growing.sid)
        try:
            before = _page(live, {})
            assert before == _pages(tmp_path, growing.sid)["last"]
            grow(growing, [TurnPlan(rounds=1), TurnPlan(rounds=0)])
            assert live.poll() > 0
            after = _page(live, {})
        finally:
            live.close()
        (tmp_path / f"{growing.sid}.audit").unlink()
        assert after == _pages(tmp_path, growing.sid)["last"]
        assert after != before
    finally:
        growing.close()


def test_the_status_read_from_the_end_of_the_log_is_the_fold_s_at_every_length(
    tmp_path: Path,
) -> None:
    """A first view takes whether a turn is open from the log's end
    (:func:`open_turn`); it is what folding every event gives, wherever the log stops."""
    growing = Growing(tmp_path)
    try:
        grow(growing, [TurnPlan(rounds=1), TurnPlan(rounds=0, flush_mid_step=True)])
        events = growing.builder.session.events
        summary = Summary(id=growing.sid)
        assert open_turn(events[:0]) is False
        for n, event in enumerate(events, start=1):
            summary.feed(event.type, event.seq, event.data)
            assert open_turn(events[:n]) is summary.open_turn
        assert any(open_turn(events[:n]) for n in range(len(events)))
        assert not open_turn(events)
    finally:
        growing.close()
