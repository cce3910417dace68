"""Sessions for the audit tests: real agents on the in-process emulator, and a
small synthetic log with compaction and trimming built through Session.append."""

from __future__ import annotations

from typing import Any

from tapelog.log._api import Event, Session


def add_call(a: int, b: int) -> dict[str, Any]:
    return {"tool_calls": [{"name": "add", "arguments": f'{{"a": {a}, "b": {b}}}'}]}


HEADER = {
    "config": {"provider": "deepseek", "model": "deepseek-chat"},
    "system": "You are terse.",
}
# Plenty: whatever the estimate, the provider reported at least what was expected.
USAGE = {"input": 0, "cache_read": 10**6, "cache_write": 0, "output": 5, "reasoning": 0}


class LogBuilder:
    """Appends valid loop events (docs/format.md, /compaction spec) to a Session."""

    def __init__(self) -> None:
        self.session = Session("synthetic")
        self.turn = 0
        self.step = 0

    def append(self, etype: str, data: dict[str, Any], **kw: Any) -> Event:
        return self.session.append(etype, data, **kw)

    def user(self, text: str) -> Event:
        self.turn += 1
        self.step = 0
        self.append("turn/start", {"turn": self.turn})
        return self.append(
            "user/message",
            {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}},
            surface_op="append",
        )

    def step_with(self, content: list[dict[str, Any]], *, header: bool = False) -> Event:
        """One step: step/start, the initial header if asked, the answer."""
        self.step += 1
        self.append("step/start", {"turn": self.turn, "step": self.step})
        if header:
            self.append("request/header", {"header": HEADER, "reason": "initial"})
        source = {"provider": "deepseek", "model": "deepseek-chat"}
        data = {"turn": self.turn, "step": self.step, "content": content, "source": source}
        return self.append("assistant/message", {**data, "usage": USAGE}, surface_op="append")

    def tool_round(self, call_id: str, result: str, *, header: bool = False) -> Event:
        """A step calling one tool, then its result; returns the tool/result event."""
        block = {"type": "tool_call", "id": call_id, "name": "shout", "arguments": "{}"}
        self.step_with([block], header=header)
        call = self.append(
            "tool/call",
            {
                "turn": self.turn,
                "step": self.step,
                "call_id": call_id,
                "name": "shout",
                "arguments": "{}",
            },
        )
        result_event = self.append(
            "tool/result",
            {
                "turn": self.turn,
                "step": self.step,
                "call_id": call_id,
                "content": result,
                "is_error": False,
            },
            surface_op="append",
            source_seqs=[call.seq],
        )
        self.append("step/end", {"turn": self.turn, "step": self.step})
        return result_event

    def answer(self, text: str, *, header: bool = False) -> None:
        self.step_with([{"type": "text", "text": text}], header=header)
        self.append("step/end", {"turn": self.turn, "step": self.step})
        self.append("turn/end", {"turn": self.turn, "reason": {"kind": "completed"}})

    def trim(self, result: Event) -> Event:
        data = dict(result.data)
        data["content"] = result.data["content"][:20] + "\n[... 980 characters trimmed ...]"
        op = {"op": "replace", "start": result.seq, "end": result.seq}
        return self.append("tool/result", data, surface_op=op, source_seqs=[result.seq])

    def compact(self, cid: str, start: int, end: int) -> list[Event]:
        """A successful compaction of the surface nodes ``start..end``."""
        shadowed = [s for s in self.session.surface if start <= s <= end]
        usage = {"input": 100, "cache_read": 0, "cache_write": 0, "output": 20, "reasoning": 0}
        events = [
            self.append(
                "compact/start",
                {"id": cid, "trigger": "manual", "turn": None, "context_tokens": 900},
            ),
            self.append(
                "compact/summary",
                {
                    "id": cid,
                    "provider": "deepseek",
                    "model": "deepseek-chat",
                    "max_tokens": 512,
                    "usage": usage,
                    "shadowed": {"start": start, "end": end},
                    "shadowed_seqs": shadowed,
                    "shadowed_tokens": 800,
                    "summary_tokens": 20,
                },
            ),
            self.append(
                "user/message",
                {
                    "content": [{"type": "text", "text": "<summary>We shouted.</summary>"}],
                    "source": {"kind": "compaction", "id": cid},
                },
                surface_op={"op": "replace", "start": start, "end": end},
                source_seqs=shadowed,
            ),
            self.append("compact/end", {"id": cid, "ok": True}),
        ]
        return events
