"""A session file cut at every byte of a multi-tool step resumes, or is refused in one line.

The shape a power cut leaves: the loop logs a step's ``assistant/message`` and
its ``tool/call`` events in one flush, then runs the tools. A cut inside that
write used to leave an assistant message whose tool calls had no ``tool/call``
(so repair answered none of them): ``verify`` said ok, and every resume was
refused by the provider (``An assistant message with 'tool_calls' must be
followed by tool messages``), for good.

Here the real loop runs against the in-process emulator (which refuses
unpaired tool turns with the providers' own 400s) on the JSONL store; the file
is then cut at every byte offset from the multi-tool step's ``step/start`` line
to its ``step/end`` line. Every cut verifies (bar the missing digest a cut at a
line end looks like), loads, and resumes with a new turn that completes with
every request accepted, the bytes received being the rebuild from the stored
log. Never a provider 400. (A cut at a line end inside a write leaves whole
events after the last digest: the resume is refused in one line, then accepted
with ``accept_undigested``, as a user would. Cuts that load the same lines the same way, torn
or not, resume alike; each such class is resumed once, to keep the test fast.)
"""

from __future__ import annotations

from pathlib import Path

from tapelog import UndigestedEventsError
from tapelog.emulator import Emulator
from tapelog.llm import encode_request
from tapelog.log import decode
from tapelog.log._api import Session
from tapelog.request._api import rebuild_requests
from tapelog.store import JsonlStore
from tapelog.store._api import verify_jsonl

from ._harness import add, agent_on, shout

TWO_CALLS = {
    "tool_calls": [
        {"name": "add", "arguments": '{"a": 1, "b": 2}'},
        {"name": "shout", "arguments": '{"text": "hi"}'},
    ]
}


async def _original(root: Path) -> tuple[str, bytes, list[bytes]]:
    """A stored session: a turn whose first step calls two tools, then answers."""
    emulator = Emulator(script=[TWO_CALLS, {"text": "3 and HI"}])
    session = Session("torn")
    with JsonlStore(root).create(session) as writer:
        async with agent_on(emulator, session=session, writer=writer, tools=[add, shout]) as agent:
            result = await agent.run("add and shout")
    assert result.reason["kind"] == "completed"
    data = (root / "torn.jsonl").read_bytes()
    return session.id, data, [r.body for r in emulator.received]


def _step_span(data: bytes) -> tuple[int, int]:
    """Byte offsets of the multi-tool step: its step/start line to its step/end line."""
    offsets, at = [], 0
    for line in data.splitlines(keepends=True):
        offsets.append((at, line))
        at += len(line)
    start = end = None
    for begin, line in offsets[1:]:
        event = decode(line)
        if event["type"] == "step/start" and start is None:
            start = begin
        if event["type"] == "step/end" and end is None:
            end = begin + len(line)
    assert start is not None
    assert end is not None
    return start, end


async def _resume(root: Path, session_id: str) -> tuple[list[bytes], str]:
    emulator = Emulator(script=[{"text": "again"}])
    store = JsonlStore(root)
    refusal = ""
    try:
        session, writer = store.open(session_id)
    except UndigestedEventsError as exc:
        # A cut at a line end inside a write leaves whole events after the last
        # digest: refused in one line until the user accepts them (docs/security.md).
        refusal = str(exc)
        session, writer = store.open(session_id, accept_undigested=True)
    assert "\n" not in refusal
    assert not refusal or "--accept-undigested" in refusal
    with writer:
        async with agent_on(emulator, session=session, writer=writer, tools=[add, shout]) as agent:
            result = await agent.run("and now?")
    assert [r.status for r in emulator.received] == [200], [r.body for r in emulator.received]
    return [r.body for r in emulator.received], result.reason["kind"]


async def test_every_cut_of_a_multi_tool_step_verifies_loads_and_resumes(
    tmp_path: Path,
) -> None:
    session_id, data, sent = await _original(tmp_path / "original")
    start, end = _step_span(data)
    assert end - start > 500  # the step's lines: header, chunks, message, calls, results
    resumed: dict[tuple[bytes, bool], str] = {}  # what each distinct load resumed to
    for cut in range(start, end + 1):
        cut_data = data[:cut]
        report = verify_jsonl(cut_data, expected_id=session_id)
        # A cut exactly at a line end inside a write looks like a removed digest
        # (docs/format.md, "Digests"); nothing else may be wrong with it.
        problems = [str(p) for p in report.problems]
        assert all("after the last digest" in p for p in problems), (cut, problems)
        root = tmp_path / f"cut-{cut}"
        root.mkdir()
        (root / f"{session_id}.jsonl").write_bytes(cut_data)
        loaded = JsonlStore(root).load(session_id)
        lines = b"".join(e.encode() + b"\n" for e in loaded.session.events)
        # Opening keeps the complete lines and drops a torn one: cuts that load the
        # same lines the same way resume the same way, so each is resumed once.
        key = (lines, not cut_data.endswith(b"\n"))
        if key not in resumed:
            resumed[key] = await _resume_and_check(root, session_id, sent, cut)
    counts = {outcome: list(resumed.values()).count(outcome) for outcome in set(resumed.values())}
    # every event line of the step was cut inside (torn) and at its end
    assert counts.get("interrupted", 0) >= 10, counts


async def _resume_and_check(root: Path, session_id: str, sent: list[bytes], cut: int) -> str:
    """Resume the cut session with a new turn; check the log explains every byte sent."""
    received, reason = await _resume(root, session_id)
    assert reason == "completed", cut
    stored = (root / f"{session_id}.jsonl").read_bytes()
    after = verify_jsonl(stored, expected_id=session_id)
    assert after.ok, (cut, [str(p) for p in after.problems])
    loaded = JsonlStore(root).load(session_id).session
    rebuilt = [encode_request(r.request) for r in rebuild_requests(loaded)]
    # The resumed request is the last one the log holds, byte for byte; the
    # ones before it are the original run's requests the cut kept.
    assert rebuilt[-1:] == received, cut
    assert rebuilt[:-1] == sent[: len(rebuilt) - 1], cut
    kinds = [e.data["reason"]["kind"] for e in loaded.events if e.type == "turn/end"]
    return str(kinds[0])
