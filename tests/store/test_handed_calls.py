"""Tool calls a turn hands to its client: verify, repair and the audit accept them.

``tapelog proxy`` does not run the tools its client's model calls: the turn
logs the ``tool/call`` events and ends ``tool_calls``; the results are
``tool/result`` events of the client's next turn, before its ``step/start``.
The rule every check shares: such a call is answered before the next request.
Logs of an older proxy (no ``tool/call`` events, steps numbered from 0) still
load, verify and audit.
"""

from __future__ import annotations

from typing import Any

from _unruly import unruly
from tapelog import Session
from tapelog.audit import cache_report
from tapelog.log._api import repair_interrupted
from tapelog.request import walk_requests
from tapelog.store._api import verify_jsonl
from tapelog.store._format import header_line

SOURCE = {"provider": "emulator", "model": "e"}
HEADER = {"config": {"provider": "emulator", "model": "e"}}


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


class ProxyLog:
    """A session written the way the proxy writes one (``step``: its step number)."""

    def __init__(self, *, step: int = 1, calls: bool = True, damaged: bool = False) -> None:
        """``damaged``: the log may break the structural rules (for verify to report)."""
        self.s = Session("handed", created=1, clock=lambda: 2)
        if damaged:
            unruly(self.s)
        self.step = step
        self.calls = calls
        self.turn = 0

    def request(self, *messages: tuple[str, Any]) -> None:
        """A turn's start, the client's new messages and the step's start."""
        s, self.turn = self.s, self.turn + 1
        s.append("turn/start", {"turn": self.turn})
        for kind, value in messages:
            if kind == "user":
                data = {"content": _text(value), "source": {"kind": "client"}}
                s.append("user/message", data, surface_op="append")
            else:
                data = {
                    "turn": self.turn,
                    "step": self.step,
                    "call_id": value,
                    "content": "3",
                    "is_error": False,
                }
                s.append("tool/result", data, surface_op="append")
        s.append("step/start", {"turn": self.turn, "step": self.step})
        if self.turn == 1:
            s.append("request/header", {"header": HEADER, "reason": "initial"})

    def answer(self, *call_ids: str, end: str | None = None, ended: bool = True) -> None:
        """The upstream's answer (tool calls, or text), ``step/end`` and ``turn/end``."""
        s, at = self.s, {"turn": self.turn, "step": self.step}
        blocks = [
            {"type": "tool_call", "id": c, "name": "add", "arguments": '{"a": 1, "b": 2}'}
            for c in call_ids
        ]
        content = blocks or _text("done")
        s.append(
            "assistant/message", {**at, "content": content, "source": SOURCE}, surface_op="append"
        )
        if self.calls:
            for block in blocks:
                call = {"call_id": block["id"], "name": "add", "arguments": block["arguments"]}
                s.append("tool/call", {**at, **call})
        s.append("step/end", at)
        if not ended:
            return
        kind = end or ("tool_calls" if call_ids else "completed")
        s.append("turn/end", {"turn": self.turn, "reason": {"kind": kind}})

    def bytes(self) -> bytes:
        lines = [header_line(self.s.info)] + [e.encode() for e in self.s.events]
        return b"".join(line + b"\n" for line in lines)


def _conversation(log: ProxyLog) -> ProxyLog:
    log.request(("user", "1 + 2, 3 + 4?"))
    log.answer("c1", "c2")
    log.request(("tool", "c1"), ("tool", "c2"))
    log.answer()
    return log


def _problems(log: ProxyLog) -> list[str]:
    return [str(p) for p in verify_jsonl(log.bytes(), expected_id="handed").problems]


def test_calls_handed_to_the_client_verify_and_audit() -> None:
    log = _conversation(ProxyLog())
    assert _problems(log) == []
    walked = walk_requests(log.s, one_shots=True)
    assert [w.kind for w in walked] == ["loop", "loop"]
    assert len(cache_report(log.s).requests) == 2


def test_an_older_proxys_log_without_calls_and_step_0_still_verifies_and_audits() -> None:
    log = _conversation(ProxyLog(step=0, calls=False))
    assert not any(e.type == "tool/call" for e in log.s.events)
    assert _problems(log) == []
    assert len(cache_report(log.s).requests) == 2


def test_calls_left_open_by_a_turn_that_did_not_hand_them_over_are_reported() -> None:
    log = ProxyLog(damaged=True)
    log.request(("user", "go"))
    log.answer("c1", end="completed")
    problems = _problems(log)
    # the step's own rule, and the end of the log (whose next request would hold c1)
    assert (
        "step 1 of turn 1 ended (seq 6) with tool calls that have no result: c1 (seq 5); "
        "only a turn/end that hands them on" in problems[0]
    )
    assert all("c1" in p for p in problems)


def test_a_handed_call_the_next_request_does_not_answer_is_reported() -> None:
    log = ProxyLog(damaged=True)
    log.request(("user", "go"))
    log.answer("c1", "c2")
    log.request(("tool", "c1"))  # c2 never came back
    (problem,) = _problems(log)
    assert "this step's request would hold tool calls without their results (c2" in problem


def test_repair_of_a_crash_in_the_clients_next_turn_leaves_a_log_that_verifies() -> None:
    log = ProxyLog()
    log.request(("user", "go"))
    log.answer("c1", "c2")
    log.s.append("turn/start", {"turn": 2})
    data = {"turn": 2, "step": 1, "call_id": "c1", "content": "3", "is_error": False}
    log.s.append("tool/result", data, surface_op="append")
    # The proxy stopped here, before the request: the turn is closed as
    # interrupted; c2 is still the client's to answer in its next request.
    appended = repair_interrupted(log.s)
    assert [e.type for e in appended] == ["turn/end"]
    assert _problems(log) == []
    log.turn = 2
    log.request(("tool", "c2"))
    log.answer()
    assert _problems(log) == []


def test_repair_of_a_crash_after_the_calls_were_handed_over_verifies() -> None:
    log = ProxyLog()
    log.request(("user", "go"))
    log.answer("c1", ended=False)  # the process stopped before turn/end
    assert _problems(log) == []  # the turn is still open: its writer may end it yet
    assert [e.type for e in repair_interrupted(log.s)] == ["turn/end"]
    assert _problems(log) == []
    log.turn = 1
    log.request(("tool", "c1"))  # the client answers with its next request
    log.answer()
    assert _problems(log) == []
