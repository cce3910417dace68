"""One client request on its session: what is logged before the send and after.

The structure is the loop's, with one turn per client request and one step in
it, numbered 1 (as the loop numbers its first step)::

    turn/start
    [tool/result {"kind": "unanswered"} for tool calls the client dropped, then]
    the client's new messages: user/message {"source": {"kind": "client"}},
        tool/result, assistant/message {"source": {..., "kind": "client"}}
        (the first one a replace from the first changed message to the end,
        when the client changed the history the log holds)
    step/start                     <- the reconstruction boundary
    request/header | request/header-delta   (HeaderRecorder, only on change)
    assistant/chunk ...            (every piece the upstream streamed)
    assistant/message              (assembled; empty and interrupted on failure;
                                    the other choices of an n > 1 request as
                                    ``alternatives``)
    tool/call ...                  (one per call of the answer, in the model's order)
    step/end
    turn/end {"kind": completed | tool_calls | max_tokens | error | aborted}

A ``tool_calls`` turn hands the calls to the client: its ``tool/call`` events
stay open past the ``step/end`` (the proxy runs no tools), and their results
arrive as ``tool/result`` events at the start of the client's next request
(before its ``step/start``, so every request holds each call with its
result). A call the client drops is answered with an ``unanswered`` error
result that names the ``tool/call`` in ``source_seqs``. A replace needs a
message that is not a tool result to take the place of the old ones (a
``tool/result`` may only replace a single ``tool/result``), so it starts at
the last such message at or before the first change.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tapelog._errors import ProxyError
from tapelog.llm import LlmRequest
from tapelog.llm._api import (
    BodyCache,
    WireBody,
    WireFormat,
    assemble_alternatives,
    assemble_message,
    encode_wire_body,
)
from tapelog.log._api import EpochHeader, Event, FrozenDict, History
from tapelog.proxy._sessions import SessionState
from tapelog.request import build_request

__all__ = ["STEP", "Compared", "Exchange", "Plan", "plan_messages", "unanswered_calls"]

STEP = 1
"""The number of a proxied turn's one step: steps are numbered from 1, as the loop's."""
_CLIENT_SOURCE = {"kind": "client"}
_UNANSWERED = (
    "error: the client did not send a result for this tool call; the conversation went on "
    "without it"
)


@dataclass(frozen=True, slots=True)
class Plan:
    """How the client's messages meet the log: the first one to log
    (``start``), the surface node it replaces from (``replace_seq``, to the
    end; ``None``: appended), the first message that differed from the
    log (``changed``; ``None``: the request extends the log), and how many
    leading messages are known to be equal to the log's (``equal``, at most
    all that are: see :class:`Compared`)."""

    start: int
    replace_seq: int | None
    changed: int | None
    equal: int = 0


@dataclass(frozen=True, slots=True)
class Compared:
    """A session's last comparison: ``messages[:count]`` (a client's list)
    equal the first ``count`` messages of the session's history, which stay
    as they were while no replace bumps the surface's ``generation``. A
    client resends its history, and the proxy's translator hands the next
    request the same message objects for the part it extends (``_translate``),
    so that part compares equal by identity, in C, instead of value by value
    with the log's messages: a request then costs what is new, not the history."""

    messages: Sequence[FrozenDict]
    count: int
    generation: int

    def prefix(self, client: Sequence[FrozenDict], limit: int, generation: int) -> int:
        """How many leading ``client`` messages (at most ``limit``) are known to
        equal the history's (0 when the surface was replaced since)."""
        n = min(self.count, limit)
        if not n or generation != self.generation:
            return 0
        return n if client[:n] == self.messages[:n] else 0


def plan_messages(
    history: History,
    client: Sequence[FrozenDict],
    same: Callable[[FrozenDict, FrozenDict], bool],
    compared: Compared | None = None,
    generation: int = 0,
) -> Plan:
    """Compare the log's history with the client's messages, in order; the
    part ``compared`` (at the surface's ``generation``) vouches for is not
    compared again."""
    logged, sent = len(history), len(client)
    messages = history.messages
    limit = min(logged, sent)
    j = compared.prefix(client, limit, generation) if compared is not None else 0
    if messages[j:limit] == client[j:limit]:  # the usual case, compared in C
        j = limit
    equal = j
    while j < limit and same(messages[j], client[j]):
        j += 1
    if j == logged:
        return Plan(start=logged, replace_seq=None, changed=None, equal=equal)
    if not sent:
        raise ProxyError(
            "the request has no messages but its session has a history; the log cannot "
            "replace a history with nothing (start a new session instead)"
        )
    k = min(j, sent - 1)
    while k > 0 and client[k]["role"] == "tool":
        k -= 1
    return Plan(start=k, replace_seq=history.seqs[k], changed=j, equal=equal)


def unanswered_calls(
    messages: Sequence[FrozenDict], where: Callable[[int], str], *, start: int = 0
) -> str | None:
    """Why the messages would be refused for a tool call without its result, or
    a result without its call (every call must be answered by the tool messages
    right after it, and only those), or ``None``. ``start``: the messages before
    it are a list that passed this check (so no call is waiting at ``start``)."""
    waiting: dict[str, int] = {}
    for i in range(start, len(messages)):
        message = messages[i]
        role = message["role"]
        if role == "tool":
            call = message["content"][0]["tool_call_id"]
            if waiting.pop(call, None) is None:
                return (
                    f"{where(i)} is the result of a tool call (id {call!r}) that the message "
                    "before it did not make; the provider refuses such a request, so the "
                    "proxy does too"
                )
            continue
        if waiting:
            break
        if role == "assistant":
            waiting = {b["id"]: i for b in message["content"] if b["type"] == "tool_call"}
    if not waiting:
        return None
    call, i = next(iter(waiting.items()))
    return (
        f"{where(i)} calls a tool (id {call!r}) whose result does not follow it; the "
        "provider refuses such a request, so the proxy does too"
    )


class Exchange:
    """The events of one request on a session whose lock the caller holds."""

    def __init__(self, state: SessionState, header: EpochHeader) -> None:
        self.state = state
        self.header = header
        config = header.config
        self.source = {"provider": config.provider, "model": config.model}
        self.turn = state.turn + 1
        self.chunks: list[FrozenDict] = []
        self.message: Event | None = None
        self.header_event: Event | None = None
        self.boundary: Event | None = None
        self._nodes: History | None = None
        self.closed = False
        self.started = False
        self.before = state.session.header
        """The header in force before this request (what its changes are measured from)."""
        self.changes: list[str] = []
        """What else changed since the session's previous request (for the summary)."""
        self.reason: Mapping[str, Any] | None = None
        """How the turn ended (the logged ``turn/end`` reason), once it has."""
        self.notes: dict[str, Any] = {}
        """Other members of the ``turn/end`` reason: what the provider keeps of
        this turn (the Responses API's ``response_id``, ``previous_response``)."""

    # --- before the send ------------------------------------------------------

    def log_request(self, plan: Plan, client: Sequence[FrozenDict]) -> None:
        """Log the turn's start, the client's messages, ``step/start`` and the
        header (what :meth:`request_body` rebuilds the request from)."""
        state = self.state
        session = state.session
        state.turn = self.turn
        session.append("turn/start", {"turn": self.turn})
        self.started = True
        if plan.replace_seq is not None:
            for call_id, call_seq in state.pending.items():
                self._close_call(call_id, call_seq)
            state.pending = {}
        for i in range(plan.start, len(client)):
            op: Any = "append"
            if plan.replace_seq is not None and i == plan.start:
                op = {"op": "replace", "start": plan.replace_seq, "end": session.surface[-1]}
            self._log_message(client[i], op)
        self._nodes = session.history()
        self.boundary = session.append("step/start", {"turn": self.turn, "step": STEP})
        # Offered -> logged -> folded -> sent: the upstream gets the header as the
        # session's fold returns it, never the value offered to the log.
        self.header_event = state.recorder.record(self.header)

    def request_body(self, wire: WireFormat, cache: BodyCache) -> tuple[LlmRequest, WireBody]:
        """The request rebuilt from the log at the boundary :meth:`log_request`
        logged, and its body as the loop has it: the wire's parts (``cache``:
        the session's, so only new messages are encoded), checked by the
        session's checker (which compares only the parts it has not verified
        before), never joined on the way."""
        state = self.state
        session = state.session
        header = session.header
        nodes, boundary = self._nodes, self.boundary
        assert header is not None, "the recorder has logged a header"
        assert nodes is not None, "log_request comes first"
        assert boundary is not None, "log_request comes first"
        request = build_request(
            header=header, nodes=nodes, session_id=session.id, boundary_seq=boundary.seq
        )
        body = encode_wire_body(wire, request, cache=cache)
        if state.checker is not None:
            state.checker.check(request, body)
        return request, body

    async def durable_body(self, wire: WireFormat, *, sync_aside: bool) -> WireBody:
        """:meth:`request_body`, returned once the events :meth:`log_request`
        logged are durable. ``sync_aside`` (a store of local files whose write
        and sync are separate steps): they are written at once and synced in a
        thread while the body is rebuilt and checked in the event loop (one
        write, one sync, whose wait that work shares); otherwise the one flush
        comes after the body, in a thread."""
        writer = self.state.writer
        if not sync_aside:
            _, body = self.request_body(wire, self.state.cache)
            await asyncio.to_thread(writer.flush)
            return body
        writer.flush(sync=False)
        # In the thread now, not at the next await: the sync starts before the work.
        in_context = functools.partial(contextvars.copy_context().run, writer.sync)
        syncing = asyncio.get_running_loop().run_in_executor(None, in_context)
        try:
            _, body = self.request_body(wire, self.state.cache)
        finally:
            await syncing  # also before a refused body's turn end writes again
        return body

    def _close_call(self, call_id: str, call_seq: int | None) -> None:
        """Answer a call the client dropped before the replace shadows it (a log
        must never hold a call without its result). ``call_seq``: its
        ``tool/call`` (``None`` in a log from before the proxy logged them)."""
        data = {
            "turn": self.turn,
            "step": STEP,
            "call_id": call_id,
            "content": _UNANSWERED,
            "is_error": True,
            "error": {"kind": "unanswered"},
        }
        seqs = None if call_seq is None else [call_seq]
        self.state.session.append("tool/result", data, surface_op="append", source_seqs=seqs)

    def _log_message(self, message: FrozenDict, op: Any) -> Event:
        session = self.state.session
        role, content = message["role"], message["content"]
        if role == "tool":
            block = content[0]
            call_id = block["tool_call_id"]
            self.state.pending.pop(call_id, None)
            data: dict[str, Any] = {
                "turn": self.turn,
                "step": STEP,
                "call_id": call_id,
                "content": block["content"],
                "is_error": block["is_error"],
            }
            for key in ("extra", "omit"):
                if key in block:
                    data[key] = block[key]
            etype = "tool/result"
        elif role == "assistant":
            data = {
                "turn": self.turn,
                "step": STEP,
                "content": content,
                "source": {**self.source, **_CLIENT_SOURCE},
            }
            etype = "assistant/message"
        else:
            data = {"content": content, "source": _CLIENT_SOURCE}
            if role != "user":  # a developer or system message in the history
                data["role"] = role
            etype = "user/message"
        if message.get("content_string"):
            data["content_string"] = True
        if "fields" in message:
            data["fields"] = message["fields"]
        return session.append(etype, data, surface_op=op)

    def abandon(self, error: dict[str, Any]) -> None:
        """End a turn that failed before its ``step/start`` (nothing was sent)."""
        if self.started and not self.closed:
            self.closed = True
            reason = {"kind": "error", "error": error}
            end = self.state.session.append("turn/end", {"turn": self.turn, "reason": reason})
            self.reason = end.data["reason"]  # as logged: secrets redacted

    # --- after the send -------------------------------------------------------

    def chunk(self, chunk: FrozenDict) -> None:
        """Log one piece of the upstream's answer."""
        self.state.session.append(
            "assistant/chunk", {"turn": self.turn, "step": STEP, "chunk": chunk}
        )
        self.chunks.append(chunk)

    def finish(
        self,
        *,
        error: dict[str, Any] | None = None,
        aborted: str | None = None,
        sent: bool = True,
    ) -> Event:
        """Log the answer (assembled from the chunks), ``step/end`` and ``turn/end``;
        the ``turn/end``. ``error`` or ``aborted`` end the turn without an answer:
        its chunks keep what arrived, the message is empty and interrupted."""
        assert not self.closed, "a turn ends once"
        self.closed = True
        state = self.state
        session = state.session
        assembled = assemble_message(self.chunks)
        ok = error is None and aborted is None and sent and not assembled.interrupted
        cut = assembled.finish == "max_tokens"
        content = [b for b in assembled.content if not (cut and b["type"] == "tool_call")]
        data: dict[str, Any] = {
            "turn": self.turn,
            "step": STEP,
            "content": content if ok else [],
            "source": self.source,
        }
        if assembled.usage is not None:
            data["usage"] = assembled.usage
        if not ok:
            data["interrupted"] = True
        alternatives = assemble_alternatives(self.chunks)
        if alternatives:  # the other choices of an n > 1 request
            data["alternatives"] = alternatives
        self.message = session.append("assistant/message", data, surface_op="append")
        calls = self._log_calls(data["content"])
        step: dict[str, Any] = {"turn": self.turn, "step": STEP}
        if not sent:
            step["sent"] = False
        if error is None and not ok and aborted is None:
            error = {"type": "ProviderError", "message": "the stream ended before the answer did"}
        if error is not None:
            step["error"] = error
        session.append("step/end", step)
        state.pending = calls
        if aborted is not None:
            reason: dict[str, Any] = {"kind": "aborted", "by": aborted}
        elif error is not None:
            reason = {"kind": "error", "error": error}
        elif calls:
            reason = {"kind": "tool_calls"}
        elif cut:
            reason = {"kind": "max_tokens"}
        else:
            reason = {"kind": "completed"}
        reason.update((k, v) for k, v in self.notes.items() if k not in reason)
        end = session.append("turn/end", {"turn": self.turn, "reason": reason})
        self.reason = end.data["reason"]  # as logged: secrets redacted
        return end

    def _log_calls(self, content: Sequence[FrozenDict]) -> dict[str, int | None]:
        """One ``tool/call`` per call of the answer, in the model's order, as the
        loop logs them; the client runs them and sends the results with its next
        request. The calls by id, each with its ``tool/call``'s seq."""
        session = self.state.session
        calls: dict[str, int | None] = {}
        for block in content:
            if block["type"] == "tool_call":
                data = {
                    "turn": self.turn,
                    "step": STEP,
                    "call_id": block["id"],
                    "name": block["name"],
                    "arguments": block["arguments"],
                }
                calls[block["id"]] = session.append("tool/call", data).seq
        return calls
