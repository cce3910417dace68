"""Which agent of a client a request comes from: the rule that keeps a
subagent out of its parent's session.

A request that continues a session's history (``_index``) is not always the
same conversation: real clients run several agents at once, and a subagent,
a title call or a memory extractor may send the main conversation's first
exchange as its own history, under its own system prompt and tools. Joining
it to the main session would log a rewritten system prompt and tool list the
main agent never sent (and the cache audit would blame it for them). The
provider caches per prefix, so such a request is a cold start of another
prefix: another conversation, linked to the one it branched from.

The rule (docs/proxy.md, "Which session a request belongs to"):

1. **the client says so**: when the client names its conversation (a
   *signal*, :func:`client_signal`) and the session recorded a different one,
   the request is another conversation;
2. **the same agent**: otherwise the request is the session's agent when its
   system prompt is an edit of the session's (:func:`similar`: most of the text
   kept, a timestamp or a line changed) or, rewritten, when its tools are the
   same (non-empty) set and the model the same: a changed header of one agent
   stays one session, with a named break;
3. **another agent**: anything else (a different prompt and a different tool
   set or model) starts its own session, linked to the parent.

A new conversation whose signal names a client run (:data:`RUN_SIGNALS`) that
already has a session joins that run's family (``_routing``), so a side call
that shares no history is still listed with the conversation it serves.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tapelog._errors import JsonValueError
from tapelog.log import decode
from tapelog.log._api import EpochHeader, Session

__all__ = [
    "RUN_SIGNALS",
    "Agent",
    "Signal",
    "Who",
    "another_agent",
    "client_signal",
    "session_signal",
    "similar",
]

_SIMILAR = 0.5
"""The share of a system prompt an edit keeps (see :func:`similar`)."""
_MAX_ID = 200
_USER_ID_SESSION = re.compile(r"_session_([0-9A-Za-z-]{8,})$")


@dataclass(frozen=True, slots=True)
class Signal:
    """The client's own id of its conversation, and where it was read."""

    kind: str
    id: str

    def to_json(self) -> dict[str, str]:
        return {"signal": self.kind, "id": self.id}


@dataclass(frozen=True, slots=True)
class Agent:
    """What tells one agent of a client from another: its system prompt, the
    names of its tools and its model."""

    system: str
    tools: frozenset[str]
    model: str

    @classmethod
    def of(cls, system: Any, tools: Iterable[Mapping[str, Any]], model: str) -> Agent:
        """``system`` as a string, or as blocks (their texts joined: a system
        prompt kept as blocks compares by what it says)."""
        names = frozenset(str(t.get("name", "")) for t in tools)
        return cls(_text_of(system), names, model)

    @classmethod
    def of_header(cls, header: EpochHeader) -> Agent:
        return cls.of(header.system, header.tools, header.config.model)


@dataclass(frozen=True, slots=True)
class Who:
    """Who sent a request: its agent and the client's signal, if it gives one."""

    agent: Agent
    signal: Signal | None = None

    def differs(self, session: Session) -> str | None:
        """Why the request is not ``session``'s conversation (``None``: it is)."""
        header = session.header
        if header is None:
            return None
        return another_agent(
            Agent.of_header(header), self.agent, session_signal(session), self.signal
        )

    def same_as(self, other: Who) -> bool:
        """Whether ``other``'s request would continue a session whose last
        request was this one's (the rule, on what each request says)."""
        return another_agent(self.agent, other.agent, self.signal, other.signal) is None

    def origin(
        self, parent: str | None = None, seq: int | None = None, why: str = ""
    ) -> dict[str, Any]:
        """The ``session/origin`` of a session it starts (empty: nothing to say);
        ``seq`` ``None``: it shares no history with ``parent``."""
        out: dict[str, Any] = {}
        if parent is not None:
            out["parent"] = parent
            if seq is not None:
                out["parent_seq"] = seq
            out["why"] = why
        if self.signal is not None:
            out["client"] = self.signal.to_json()
        return out


RUN_SIGNALS = frozenset(
    {"x-claude-code-session-id", "metadata.user_id", "session_id", "x-codex-window-id"}
)
"""Signals that name a client *run* (the session of a coding agent), which
its side calls share: a new conversation with one joins that run's family.
Not ``prompt_cache_key``: an application may use one key for many users."""


def _text_of(system: Any) -> str:
    if isinstance(system, str):
        return system
    if isinstance(system, list | tuple):
        return "\n".join(
            b["text"] for b in system if isinstance(b, Mapping) and isinstance(b.get("text"), str)
        )
    return ""


def _usable(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= _MAX_ID else None


def _user_id_session(user_id: Any) -> str | None:
    """The session id in Anthropic ``metadata.user_id`` as Claude Code writes it:
    ``user_<hash>_account_<uuid>_session_<uuid>``, or a JSON object with a
    ``session_id`` member. Any other user id names a user, not a conversation."""
    if not isinstance(user_id, str):
        return None
    found = _USER_ID_SESSION.search(user_id)
    if found is not None:
        return found.group(1)
    if user_id.startswith("{"):
        try:
            value = decode(user_id)
        except JsonValueError:
            return None
        if isinstance(value, Mapping):
            return _usable(value.get("session_id"))
    return None


def client_signal(body: Mapping[str, Any], headers: Mapping[str, str]) -> Signal | None:
    """The first conversation id the client gives, in this order: Claude Code's
    ``x-claude-code-session-id`` header and ``metadata.user_id`` session, the
    body's ``prompt_cache_key`` (Codex, OpenAI), Codex's ``session_id`` and
    ``x-codex-window-id`` headers (``None``: the client gives none)."""
    found = _usable(headers.get("x-claude-code-session-id"))
    if found is not None:
        return Signal("x-claude-code-session-id", found)
    metadata = body.get("metadata")
    if isinstance(metadata, Mapping):
        found = _user_id_session(metadata.get("user_id"))
        if found is not None:
            return Signal("metadata.user_id", found)
    found = _usable(body.get("prompt_cache_key"))
    if found is not None:
        return Signal("prompt_cache_key", found)
    for name in ("session_id", "x-codex-window-id"):
        found = _usable(headers.get(name))
        if found is not None:
            return Signal(name, found)
    return None


def session_signal(session: Session) -> Signal | None:
    """The signal a session's ``session/origin`` recorded (``None``: none)."""
    events = session.events
    if len(events) and events[0].type == "session/origin":  # a fork's seed copies it
        client = events[0].data.get("client")
        if client is not None:
            return Signal(client["signal"], client["id"])
    return None


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # binary search over slices compared in C
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def similar(a: str, b: str) -> bool:
    """Whether ``b`` is an edit of ``a``: what the two share at their start and
    end, or the lines they share, is at least half of the longer one. A
    timestamp or a status line changed keeps nearly all; another agent's
    prompt shares little more than an opening sentence."""
    if a == b:
        return True
    longest = max(len(a), len(b))
    if not a or not b:
        return False
    head = _common_prefix(a, b)
    tail = _common_prefix(a[head:][::-1], b[head:][::-1])
    if head + tail >= _SIMILAR * longest:
        return True
    lines_a, lines_b = a.splitlines(), b.splitlines()
    if len(lines_a) < 2 or len(lines_b) < 2:
        return False
    kept = set(lines_a) & set(lines_b)
    shared = sum(len(line) + 1 for line in lines_b if line in kept)
    return shared >= _SIMILAR * longest


def another_agent(
    before: Agent, now: Agent, before_signal: Signal | None, now_signal: Signal | None
) -> str | None:
    """Why a request whose agent is ``now`` is not the conversation of a session
    whose agent is ``before`` (``None``: it is, see the module docstring)."""
    if before_signal is not None and now_signal is not None and before_signal != now_signal:
        return f"another conversation of the client ({now_signal.kind} differs)"
    if similar(before.system, now.system):
        return None
    if before.tools and before.tools == now.tools and before.model == now.model:
        return None
    what = ["system prompt"]
    if before.tools != now.tools:
        what.append("tools")
    if before.model != now.model:
        what.append("model")
    return "another agent (" + " and ".join(what) + " differ)"
