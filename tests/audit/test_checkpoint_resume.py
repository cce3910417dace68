"""Resuming the cache audit from the checkpoint of a shorter log (tapelog.audit._checkpoint).

A log audited, grown, audited again from the checkpoint the first audit left,
gives exactly what an audit from scratch gives: the rows, the totals, and the
next checkpoint itself, byte for byte. A checkpoint that does not cover a prefix
of the log (an edited prefix, a truncated log, a damaged state) is ignored.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit._growing import AuditCounter, Growing, TurnPlan, grow
from audit._sessions import HEADER
from tapelog.audit import cache_report
from tapelog.audit._api import (
    Checkpoint,
    checkpoint_blob,
    kept_bodies,
    parse_checkpoint,
    resumed_audit,
)
from tapelog.cli import cli
from tapelog.log import decode, encode
from tapelog.request import walk_requests
from tapelog.store import JsonlStore


def _checkpointed(data: bytes, kept: Checkpoint | None, store: JsonlStore, sid: str) -> bytes:
    """Audit the log ``data`` as the CLI does (resumed from ``kept`` when it fits),
    check it against an audit from scratch, and return the new checkpoint."""
    session = store.load_bytes(sid, data).session
    resume = None if kept is None else kept.resume_point(data)
    report, state = resumed_audit(session, resume)
    fresh, fresh_state = resumed_audit(session, None)
    assert report.to_json() == fresh.to_json()
    assert report.to_json() == cache_report(session).to_json()
    assert state == fresh_state
    # The body digests the shorter log's checkpoint knew are those of this log.
    walked = list(walk_requests(session))
    known = {} if kept is None or resume is None else kept.bodies_through(resume[0].requests)
    bodies, fresh_bodies = kept_bodies(walked, known), kept_bodies(walked, {})
    assert bodies == fresh_bodies
    blob = checkpoint_blob(data, "test", len(session), report, (), state, bodies)
    assert blob == checkpoint_blob(data, "test", len(session), fresh, (), fresh_state, fresh_bodies)
    return blob


_plans = st.lists(
    st.builds(
        TurnPlan,
        rounds=st.integers(0, 2),
        low_usage=st.booleans(),
        idle_before=st.booleans(),
        new_header=st.booleans(),
        trim_after=st.booleans(),
        compact_after=st.booleans(),
        flush_mid_step=st.booleans(),
    ),
    min_size=1,
    max_size=6,
)


# One per wire: chat completions (DeepSeek's rule), Anthropic's (whose chain a
# checkpoint does not keep: the last request is rendered again), Responses.
HEADERS = [
    HEADER,
    {"config": {"provider": "anthropic", "model": "claude-sonnet-4-5"}, "system": "Be terse."},
    {
        "config": {"provider": "openai", "model": "gpt-4o", "wire": {"api": "responses"}},
        "system": "Be terse.",
    },
]


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # a directory per example
)
@given(plans=_plans, header=st.sampled_from(HEADERS))
def test_an_audit_resumed_after_each_flush_equals_one_from_scratch(
    tmp_path_factory: pytest.TempPathFactory, plans: list[TurnPlan], header: dict[str, Any]
) -> None:
    root = tmp_path_factory.mktemp("grown")
    growing = Growing(root, header=header)
    kept: list[Checkpoint | None] = [None]

    def audit() -> None:
        blob = _checkpointed(growing.path.read_bytes(), kept[0], growing.store, growing.sid)
        kept[0] = parse_checkpoint(blob)
        assert kept[0] is not None

    growing.on_flush = audit
    try:
        grow(growing, plans)
    finally:
        growing.close()


def test_a_resumed_audit_audits_only_the_requests_after_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    growing = Growing(tmp_path)
    grow(growing, [TurnPlan(rounds=2)] * 5)  # 15 requests
    data = growing.path.read_bytes()
    session = growing.store.load_bytes(growing.sid, data).session
    report, state = resumed_audit(session, None)
    assert state.requests == 14  # the last step may still grow: it is not kept
    kept = parse_checkpoint(checkpoint_blob(data, "t", len(session), report, (), state, {}))
    assert kept is not None
    grow(growing, [TurnPlan(rounds=1)] * 2)  # 4 more
    growing.close()
    data = growing.path.read_bytes()
    session = growing.store.load_bytes(growing.sid, data).session
    counted = AuditCounter(monkeypatch)
    resumed, _ = resumed_audit(session, kept.resume_point(data))
    assert counted.count == 1 + 4
    assert resumed.to_json() == cache_report(session).to_json()


def _two_logs(tmp_path: Path) -> tuple[Growing, bytes, Checkpoint]:
    """A log of 3 turns with its checkpoint, then grown by 2 turns."""
    growing = Growing(tmp_path)
    grow(growing, [TurnPlan(rounds=1, low_usage=i == 1) for i in range(3)])
    data = growing.path.read_bytes()
    session = growing.store.load_bytes(growing.sid, data).session
    report, state = resumed_audit(session, None)
    kept = parse_checkpoint(checkpoint_blob(data, "t", len(session), report, (), state, {}))
    assert kept is not None
    grow(growing, [TurnPlan(rounds=1), TurnPlan(rounds=0, idle_before=True)])
    growing.close()
    return growing, data, kept


def test_a_checkpoint_of_an_edited_prefix_is_not_resumed_from(tmp_path: Path) -> None:
    growing, _, kept = _two_logs(tmp_path)
    grown = growing.path.read_bytes()
    assert kept.resume_point(grown) is not None
    # One byte of the covered prefix changed (the store's load would refuse
    # it, but the checkpoint does not rely on that).
    at = grown.index(b"Turn 1: shout.")
    edited = grown[:at] + b"turn" + grown[at + 4 :]
    assert len(edited) == len(grown)
    assert kept.resume_point(edited) is None


def test_a_checkpoint_of_a_longer_log_is_not_resumed_from(tmp_path: Path) -> None:
    _, old, kept = _two_logs(tmp_path)
    assert kept.resume_point(old[:-1]) is None  # truncated by one byte
    assert kept.resume_point(old[: len(old) // 2]) is None
    assert kept.resume_point(old) is not None  # the very log: resumable too


def test_a_checkpoint_with_a_damaged_state_is_not_resumed_from(tmp_path: Path) -> None:
    growing, old, kept = _two_logs(tmp_path)
    grown = growing.path.read_bytes()
    state_line = kept.state_line.replace(b'"deepseek"', b'"openai"', 1)
    assert state_line != kept.state_line
    damaged = Checkpoint(**{**_fields(kept), "state_line": state_line})
    assert damaged.resume_point(grown) is None
    assert damaged.covers(old, "t")  # the rows are still the audit of the old log


def _fields(kept: Checkpoint) -> dict[str, Any]:
    return {name: getattr(kept, name) for name in Checkpoint.__slots__}


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), obj={"debug": False})
    assert result.exit_code == 0, result.output
    return result.stdout


def _cli_outputs(root: Path, sid: str, page: Path) -> tuple[str, str, bytes]:
    """``tapelog report`` (first: it resumes and rewrites the checkpoint), then
    ``tapelog cache --json`` and the table (read from that checkpoint)."""
    _run("report", sid, "--store", str(root), "-o", str(page))
    as_json = _run("cache", sid, "--store", str(root), "--json")
    return as_json, _run("cache", sid, "--store", str(root)), page.read_bytes()


def test_cache_and_report_of_a_session_grown_in_increments_equal_a_fresh_audit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After each increment: the outputs with the previous checkpoint equal the
    outputs without one, and so does the checkpoint each run leaves."""
    root = tmp_path / "store"
    growing = Growing(root)
    checkpoint = growing.path.with_suffix(".audit")
    counted = AuditCounter(monkeypatch)
    increments = [
        [TurnPlan(rounds=2)],
        [TurnPlan(rounds=1, low_usage=True), TurnPlan(rounds=0, idle_before=True, low_usage=True)],
        [TurnPlan(rounds=1, new_header=True, trim_after=True)],
        [TurnPlan(rounds=2, compact_after=True), TurnPlan(rounds=1, flush_mid_step=True)],
    ]
    requests = 0
    for i, plans in enumerate(increments):
        grow(growing, plans)
        counted.count = 0
        resumed = _cli_outputs(root, growing.sid, tmp_path / f"resumed-{i}.html")
        audited = counted.count
        kept = checkpoint.read_bytes()
        checkpoint.unlink()
        fresh = _cli_outputs(root, growing.sid, tmp_path / f"fresh-{i}.html")
        assert resumed == fresh
        assert checkpoint.read_bytes() == kept
        total = len(decode(fresh[0])["requests"])
        if i:  # the new requests and the last one covered, not the whole log
            assert audited == total - requests + 1
        requests = total
    growing.close()
    assert "compaction" in fresh[1]
    assert "idle" in fresh[1]


def test_a_live_view_resumes_each_audit_from_the_one_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the checkpoint of the bytes it loaded, then from its own last audit."""
    from tapelog.serve._live import LiveSession

    growing = Growing(tmp_path)
    grow(growing, [TurnPlan(rounds=2), TurnPlan(rounds=1)])
    _run("cache", growing.sid, "--store", str(tmp_path), "--json")  # leaves the checkpoint
    counted = AuditCounter(monkeypatch)
    live = LiveSession(JsonlStore(tmp_path), growing.sid)
    try:
        assert len(live.audit().requests) == 5
        assert counted.count == 0
        for plans, new in (([TurnPlan(rounds=1)], 2), ([TurnPlan(rounds=0)] * 2, 2)):
            grow(growing, plans)
            assert live.poll() > 0
            counted.count = 0
            audit = live.audit()
            assert counted.count == new + 1  # the last request before, and the new ones
            assert audit.to_json() == cache_report(live.session).to_json()
    finally:
        live.close()
        growing.close()


@pytest.mark.parametrize(
    "mismatch",
    [
        "edited prefix",
        "truncated log",
        "another tapelog version",
        "state changed, its digest kept",
        "state forged with its digest",
    ],
)
def test_a_checkpoint_that_does_not_fit_the_grown_log_is_ignored_and_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mismatch: str
) -> None:
    """``tapelog cache`` on a log whose checkpoint does not cover a prefix of it
    (or is damaged) audits from the start: the output, and the checkpoint it
    writes, are those of a run without one."""
    root = tmp_path / "store"
    growing = Growing(root)
    grow(growing, [TurnPlan(rounds=2), TurnPlan(rounds=1, low_usage=True)])
    short = growing.path.read_bytes()
    _run("cache", growing.sid, "--store", str(root), "--json")
    checkpoint = growing.path.with_suffix(".audit")
    grow(growing, [TurnPlan(rounds=1), TurnPlan(rounds=0)])
    growing.close()
    blob = checkpoint.read_bytes()
    head_line, rows_line, state_line, _ = blob.split(b"\n")
    head = decode(head_line)
    if mismatch == "edited prefix":  # another log of the same id, as long, other words
        other = Growing(tmp_path / "other")
        grow(other, [TurnPlan(rounds=2, idle_before=True)] + [TurnPlan(rounds=1)] * 3)
        other.close()
        growing.path.write_bytes(other.path.read_bytes())
    elif mismatch == "truncated log":  # the log as it was before the checkpoint's
        growing.path.write_bytes(short[: short.rindex(b"\n", 0, len(short) - 1) + 1])
    elif mismatch == "another tapelog version":
        head["tapelog"] = "0.0.0"
    elif mismatch == "state changed, its digest kept":
        state_line = state_line.replace(b'"deepseek"', b'"openai"', 1)
    else:  # a consistent forgery is not noticed (the digests are no signature), but
        # one of the wrong shape is: the state is ignored, the rows still match.
        state_line = encode({"requests": "all", "stores": {}, "seen": {}, "chain": None})
        head["state_sha256"] = hashlib.sha256(state_line).hexdigest()
    checkpoint.write_bytes(b"\n".join([encode(head), rows_line, state_line, b""]))
    counted = AuditCounter(monkeypatch)
    out = _run("cache", growing.sid, "--store", str(root), "--json")
    assert counted.count == len(decode(out)["requests"])  # from the start
    rebuilt = checkpoint.read_bytes()
    checkpoint.unlink()
    assert _run("cache", growing.sid, "--store", str(root), "--json") == out
    assert checkpoint.read_bytes() == rebuilt
