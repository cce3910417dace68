"""A loaded log is left out of the cyclic collector's passes (issue 20).

A session's events and their payloads live as long as the session and form no
reference cycles, so a full collection that walks them is pure cost, and one
that grows with every log the process holds. ``read_session_bytes`` (under
every store's ``load`` and ``open``) freezes what the load built
(``gc.freeze``): later collections skip it, reference counting still frees it.
``verify`` freezes a valid log's session too.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from tapelog import CorruptLogError
from tapelog.store import JsonlStore
from tapelog.store._api import verify_jsonl

from .conformance import full_session


def _tracked_ids() -> set[int]:
    return {id(obj) for obj in gc.get_objects()}  # generations 0-2, not the frozen


def test_a_loaded_session_is_not_walked_by_later_collections(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    with store.create(full_session("gc")):
        pass
    loaded = store.load("gc").session
    payloads = [event.data for event in loaded.events if type(event).__name__ == "Event"]
    assert payloads
    assert gc.is_tracked(payloads[0])
    tracked = _tracked_ids()
    assert id(loaded) not in tracked
    assert not any(id(data) in tracked for data in payloads)
    gc.collect()
    assert len(loaded.events) == len(full_session("gc").events)


def test_a_frozen_session_is_still_freed_when_dropped(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    with store.create(full_session("drop")):
        pass
    session = store.load("drop").session
    session.history()
    gone = weakref.ref(session)
    was_enabled = gc.isenabled()
    gc.disable()  # reference counting alone must free it: the log holds no cycles
    try:
        del session
        assert gone() is None
    finally:
        if was_enabled:
            gc.enable()


def test_a_refused_log_freezes_nothing(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    with store.create(full_session("bad")):
        pass
    path = store.path("bad")
    path.write_bytes(path.read_bytes().replace(b'"seq":3', b'"seq":4', 1))
    before = gc.get_freeze_count()
    with pytest.raises(CorruptLogError):
        store.load("bad")
    assert gc.get_freeze_count() == before


def test_a_verified_session_is_frozen_and_a_damaged_report_is_not(tmp_path: Path) -> None:
    """``verify`` of a valid log keeps its session out of later passes, as a
    load does; a damaged log's report (exceptions, tracebacks) freezes nothing."""
    store = JsonlStore(tmp_path)
    with store.create(full_session("v")):
        pass
    data = store.path("v").read_bytes()
    report = verify_jsonl(data, expected_id="v")
    assert report.ok
    assert report.session is not None
    assert id(report.session) not in _tracked_ids()
    damaged = verify_jsonl(data.replace(b'"seq":3', b'"seq":4', 1), expected_id="v")
    assert not damaged.ok
    assert gc.is_tracked(damaged.problems)
    assert id(damaged.problems) in _tracked_ids()  # not frozen: a collection may free it
