"""Logs of other people's agents, as ``tapelog proxy`` writes them (docs/format.md).

:class:`ClientLog` takes what a client sends (model, options, system, tools and
its whole message list) and appends the events the proxy writes for it, with
the public log API only: one turn with one step (step 1) per request; the header through
:class:`HeaderRecorder` (snapshot, delta, or ``fallback``); messages the log
does not have yet appended (``user/message`` with source kind ``client``); and,
when the client sent an earlier message differently, one surface ``replace``
from that message to the end of the history, the rest re-appended.

:func:`client_resends` does the same rewrite on a session an :class:`Agent`
runs, between turns, so the emulator's real cache accounting sees the edit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tapelog.log import encode
from tapelog.log._api import EpochHeader, HeaderRecorder, LlmCallConfig, Session, thaw

START_MS = 1_714_550_400_000  # 2024-05-01T08:00:00Z

# "Plenty" cached: whatever the estimate, the provider reported at least what
# was expected, so only what the log shows decides a break.
PLENTY = {"input": 0, "cache_read": 10**6, "cache_write": 0, "output": 5, "reasoning": 0}
# An answer that read nothing from the cache (for the idle-gap request).
COLD = {"input": 10**6, "cache_read": 0, "cache_write": 0, "output": 5, "reasoning": 0}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def reasoning(value: str) -> dict[str, Any]:
    return {"type": "reasoning", "text": value}


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}


def result(call_id: str, content: str) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_call_id": call_id, "content": content, "is_error": False}
    return {"role": "tool", "content": [block]}


def tool_schema(name: str, description: str = "") -> dict[str, Any]:
    return {
        "name": name,
        "description": description or f"The {name} tool.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    }


class ClientLog:
    """A session written the way the proxy writes a client's requests."""

    def __init__(self, provider: str = "openai", session_id: str = "client") -> None:
        self.provider = provider
        self.now = START_MS
        self.session = Session(session_id, created=START_MS, clock=lambda: self.now)
        self.recorder = HeaderRecorder(self.session)
        self.turn = 0
        self.requests = 0

    def send(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str,
        system: str,
        tools: Sequence[Mapping[str, Any]],
        answer: Mapping[str, Any],
        usage: Mapping[str, Any] = PLENTY,
        wait_ms: int = 10_000,
        **options: Any,
    ) -> int:
        """Log one client request and its answer; returns the request's 1-based index."""
        self.now += wait_ms
        turn, s = self.turn, self.session
        self.turn += 1
        s.append("turn/start", {"turn": turn})
        self._sync(messages, turn)
        s.append("step/start", {"turn": turn, "step": 1})
        config = LlmCallConfig(provider=self.provider, model=model, **options)
        self.recorder.record(EpochHeader(config=config, system=system, tools=list(tools)))
        source = {"provider": self.provider, "model": model}
        data = {"turn": turn, "step": 1, "content": answer["content"], "source": source}
        s.append("assistant/message", {**data, "usage": dict(usage)}, surface_op="append")
        s.append("step/end", {"turn": turn, "step": 1})
        s.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        self.requests += 1
        return self.requests

    def _sync(self, messages: Sequence[Mapping[str, Any]], turn: int) -> None:
        """Append what is new; replace from the first message sent differently."""
        nodes = self.session.derive_nodes()
        first = 0
        while first < min(len(nodes), len(messages)) and encode(nodes[first][1]) == encode(
            messages[first]
        ):
            first += 1
        for i in range(first, len(messages)):
            op: Any = "append"
            if i == first and first < len(nodes):
                op = {"op": "replace", "start": nodes[first][0], "end": nodes[-1][0]}
            etype, data = self._event(messages[i], turn)
            self.session.append(etype, data, surface_op=op)

    def _event(self, message: Mapping[str, Any], turn: int) -> tuple[str, dict[str, Any]]:
        role, content = message["role"], list(message["content"])
        if role == "user":
            return "user/message", {"content": content, "source": {"kind": "client"}}
        if role == "assistant":
            source = {"provider": self.provider, "model": "client"}
            return "assistant/message", {
                "turn": turn,
                "step": 1,
                "content": content,
                "source": source,
            }
        (block,) = content
        return "tool/result", {
            "turn": turn,
            "step": 1,
            "call_id": block["tool_call_id"],
            "content": block["content"],
            "is_error": block["is_error"],
        }


def client_resends(session: Session, edits: Mapping[int, Callable[[Any], Any]]) -> None:
    """Rewrite an agent's history between turns as a client that sends history
    message ``k`` (1-based) as ``edits[k](data)`` would: one ``replace`` from the
    first edited node to the end of the surface, every later node re-appended."""
    nodes = session.surface
    first = min(edits) - 1
    tail = nodes[first:]
    for i, seq in enumerate(tail):
        event = session.event(seq)
        data = thaw(event.data)
        edit = edits.get(first + i + 1)
        if edit is not None:
            data = edit(data)
        op: Any = {"op": "replace", "start": tail[0], "end": tail[-1]} if i == 0 else "append"
        session.append(event.type, data, surface_op=op)
