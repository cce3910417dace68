"""Valid payloads for every event type, and a small session with a bit of everything."""

from __future__ import annotations

from typing import Any

from tapelog.log._api import Session


def text(t: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t}]


def user(t: str = "hi") -> dict[str, Any]:
    return {"content": text(t), "source": {"kind": "user"}}


def assistant(t: str = "ok", *, step: int = 0, calls: int = 0) -> dict[str, Any]:
    content: list[dict[str, Any]] = text(t) if t else []
    content += [
        {"type": "tool_call", "id": f"c{k}", "name": "read", "arguments": '{"path":"a"}'}
        for k in range(calls)
    ]
    return {
        "turn": 0,
        "step": step,
        "content": content,
        "source": {"provider": "openai", "model": "m"},
    }


def tool_result(call_id: str = "c0", content: Any = "file text", **extra: Any) -> dict[str, Any]:
    return {"turn": 0, "step": 0, "call_id": call_id, "content": content, "is_error": False} | extra


HEADER = {
    "config": {"provider": "openai", "model": "m"},
    "system": "You are terse.\nAnswer in English.",
    "tools": [{"name": "read", "parameters": {"type": "object"}}],
}

VALID: dict[str, dict[str, Any]] = {
    "turn/start": {"turn": 0},
    "turn/end": {"turn": 0, "reason": {"kind": "completed"}},
    "step/start": {"turn": 0, "step": 0},
    "step/end": {"turn": 0, "step": 0},
    "user/message": user(),
    "context/message": {"content": text("note"), "source": {"kind": "inject"}},
    "assistant/chunk": {"turn": 0, "step": 0, "chunk": {"kind": "text", "text": "o"}},
    "assistant/message": assistant(),
    "tool/call": {"turn": 0, "step": 0, "call_id": "c0", "name": "read", "arguments": "{}"},
    "tool/approval": {"turn": 0, "step": 0, "call_id": "c0", "approved": True, "by": "ann"},
    "tool/result": tool_result(),
    "request/header": {"header": HEADER, "reason": "initial"},
    "request/header-delta": {"config": {"provider": "openai", "model": "m2"}},
    "compact/start": {},
    "compact/summary": {"provider": "openai", "model": "m", "max_tokens": 100},
    "compact/end": {},
    "session/end-seed": {"parent": "p", "seed_length": 3},
    "session/origin": {
        "parent": "p",
        "parent_seq": 7,
        "why": "another agent",
        "client": {"signal": "prompt_cache_key", "id": "k"},
    },
    "log/digest": {"bytes": 120, "sha256": "0" * 64},
}


def ticking_clock(start: int = 1_700_000_000_000) -> Any:
    now = [start]

    def clock() -> int:
        now[0] += 1
        return now[0]

    return clock


def sample_session(id: str = "s-sample") -> Session:
    """A closed turn: header, user prompt, assistant tool call, tool result, answer."""
    s = Session(id, clock=ticking_clock())
    s.append("request/header", {"header": HEADER, "reason": "initial"})  # 0
    s.append("turn/start", {"turn": 0})  # 1
    s.append("user/message", user("read a"), surface_op="append")  # 2
    s.append("step/start", {"turn": 0, "step": 0})  # 3
    s.append("assistant/chunk", VALID["assistant/chunk"])  # 4
    s.append("assistant/message", assistant("", calls=1), surface_op="append")  # 5
    s.append("tool/call", VALID["tool/call"])  # 6
    s.append("tool/result", tool_result(), surface_op="append")  # 7
    s.append("step/end", {"turn": 0, "step": 0})  # 8
    s.append("step/start", {"turn": 0, "step": 1})  # 9
    s.append("assistant/message", assistant("done", step=1), surface_op="append")  # 10
    s.append("step/end", {"turn": 0, "step": 1})  # 11
    s.append("turn/end", {"turn": 0, "reason": {"kind": "completed"}})  # 12
    return s
