"""Decoding a client body that extends a recent one: only its new bytes are parsed.

A client that goes on with a conversation sends the whole history again, and
an SDK serializes the same messages to the same bytes each time. So a body
that starts with the bytes of a recent body up to the end of that body's last
message holds the same leading fields and the same messages (a JSON value is
a function of its bytes), and only what follows needs parsing: the new
messages and the fields after the message list. At 10,000 messages that is a
few hundred bytes instead of 3 MB, and no objects for the garbage collector
to walk.

:class:`BodyPrefixes` keeps the latest body of each of the few most recent
conversations (its bytes, where its message list's last message ends, the
fields before the list and the decoded messages; a body takes the place of
the body it extends), and :meth:`BodyPrefixes.decode` returns exactly
what :func:`tapelog.log.decode` returns for a body (same values, same key
order), or falls back to that full parse whenever the shortcut cannot be
sure: no recent body is a prefix, the new part is not exactly "more messages,
then the closing bracket, then more fields", a top-level key appears twice,
or the bytes are not valid JSON (then the full parse says why).

Positions are found by a scan of JSON strings and brackets (a regular
expression, in C), over the new bytes only, except once for a body that
extends nothing (a new conversation), which is scanned whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from tapelog._errors import JsonValueError
from tapelog.log import decode

__all__ = ["BodyPrefixes", "Decoded", "FamilyPrefixes"]

_KEPT = 4
"""How many recent bodies are kept (one per conversation a client runs at
once); each costs its bytes and its decoded messages."""
_TOKEN: Final = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')
"""A JSON string (skipped whole, escapes included) or a bracket."""
_SPACE: Final = b" \t\r\n"
_MESSAGES: Final = "messages"
_QUOTE, _CLOSE, _OPEN_LIST, _OPEN_OBJECT = b'"][{'
_BEFORE, _KEY, _INSIDE, _AFTER = range(4)
"""Where the scan is: before the ``messages`` key, after it, inside its list, after it."""


@dataclass(frozen=True, slots=True)
class _Body:
    """A body that was understood: its bytes up to the end of its last message
    (``raw[:end]``), the fields before its message list, and its messages."""

    raw: bytes
    end: int
    head: dict[str, Any]
    messages: list[Any]
    note: Any


@dataclass(frozen=True, slots=True)
class Decoded:
    """A decoded body, and what of it is new.

    ``fresh`` holds the values that were parsed now (the body itself after a
    full parse; the new messages and the fields after the list otherwise),
    nested as deep as in the body, for checks that need only look at what
    was not checked before; ``end`` is where the message list's last message
    ends in the bytes (``None``: not found); ``extends`` is what was
    remembered with the body this one extends (``None``: parsed whole)."""

    body: Any
    fresh: Any
    end: int | None
    extends: Any = None
    base: _Body | None = None
    """The kept body this one extends (it replaces that one when remembered)."""


class FamilyPrefixes:
    """The recent bodies of each client API: the growing list is ``messages``,
    or ``input`` on the Responses API."""

    def __init__(self, kept: int = _KEPT) -> None:
        self._lists = {"messages": BodyPrefixes(kept), "input": BodyPrefixes(kept, "input")}

    def of(self, family: str) -> BodyPrefixes:
        """The bodies of a client API (``openai``, ``anthropic``, ``responses``)."""
        return self._lists["input" if family == "responses" else "messages"]


class BodyPrefixes:
    """The recent bodies a new body may extend (see the module docstring);
    ``key``: the top-level list that grows (``input`` on the Responses API)."""

    def __init__(self, kept: int = _KEPT, key: str = _MESSAGES) -> None:
        self._kept = kept
        self.key = key
        self._bodies: list[_Body] = []  # newest last

    def decode(self, raw: bytes) -> Decoded:
        """``raw`` decoded, from the longest recent body it extends if any."""
        best: _Body | None = None
        for kept in self._bodies:
            if (
                len(raw) > kept.end
                and (best is None or kept.end > best.end)
                and raw.startswith(memoryview(kept.raw)[: kept.end])
            ):
                best = kept
        if best is not None:
            found = _extend(raw, best, self.key)
            if found is not None:
                return found
        body = decode(raw)
        end = _messages_end(raw, self.key) if isinstance(body, dict) else None
        return Decoded(body, body, end)

    def remember(self, raw: bytes, decoded: Decoded, note: Any = None) -> None:
        """Keep a body that was understood as one that later bodies may extend,
        with ``note``, what a body that extends it gets as ``extends``."""
        body, end = decoded.body, decoded.end
        if end is None or not isinstance(body, dict):
            return
        messages = body.get(self.key)
        if not isinstance(messages, list) or not messages:
            return
        head: dict[str, Any] = {}
        for key, value in body.items():
            if key == self.key:
                break
            head[key] = value
        bodies = self._bodies
        # The body this one extends is superseded: one kept body per conversation.
        bodies[:] = [b for b in bodies if b is not decoded.base]
        bodies.append(_Body(raw, end, head, messages, note))
        if len(bodies) > self._kept:
            del bodies[0]


def _extend(raw: bytes, kept: _Body, key: str) -> Decoded | None:
    """``raw`` decoded as ``kept`` followed by its new bytes (of its list ``key``);
    ``None``: not sure."""
    start = kept.end
    close = _closing(raw, start)
    if close is None:
        return None
    between = raw[start:close].lstrip(_SPACE)
    if between and between[:1] != b",":
        return None
    after = raw[close + 1 :].lstrip(_SPACE)
    try:
        new = decode(b"[0" + raw[start : close + 1])
        if after[:1] == b"}":
            rest: Any = {}
            if after[1:].strip(_SPACE):
                return None
        elif after[:1] == b"," and after[1:].lstrip(_SPACE)[:1] == b'"':
            rest = decode(b"{" + after[1:])
        else:
            return None
    except JsonValueError:
        return None
    if not isinstance(rest, dict) or key in rest or any(k in kept.head for k in rest):
        return None
    added = new[1:]
    body = dict(kept.head)
    body[key] = kept.messages + added
    body.update(rest)
    return Decoded(body, {key: added, **rest}, _back(raw, close), kept.note, kept)


def _closing(raw: bytes, start: int) -> int | None:
    """Where the array open at ``start`` (inside it, at its own level) closes."""
    depth = 1
    for token in _TOKEN.finditer(raw, start):
        char = raw[token.start()]
        if char == _QUOTE:
            continue
        if char in b"[{":
            depth += 1
            continue
        depth -= 1
        if depth == 0:
            return token.start() if char == _CLOSE else None
    return None


def _messages_end(raw: bytes, name: str = _MESSAGES) -> int | None:
    """Where the last item of the top-level list ``name`` ends (``None``: no
    such list, or a top-level key given twice: the shortcut is not sure)."""
    depth = 0
    last_end, last_char = 0, 0
    keys: set[str] = set()
    state = _BEFORE
    end: int | None = None
    for token in _TOKEN.finditer(raw):
        at = token.start()
        char = raw[at]
        if char == _QUOTE:
            if depth == 1:
                gap = raw[last_end:at].strip(_SPACE)
                if gap.endswith(b",") or (not gap and last_char == _OPEN_OBJECT):
                    key = decode(token.group())
                    if key in keys or state == _KEY:
                        return None  # given twice, or the list's value is no list
                    keys.add(key)
                    if key == name:
                        state = _KEY
                elif state == _KEY:
                    return None
            last_end, last_char = token.end(), char
            continue
        if char in b"[{":
            depth += 1
            if depth == 2 and state == _KEY:
                if char != _OPEN_LIST:
                    return None
                state = _INSIDE
        else:
            depth -= 1
            if depth == 1 and state == _INSIDE:
                end, state = _back(raw, at), _AFTER
        last_end, last_char = at + 1, char
    return end if state == _AFTER else None


def _back(raw: bytes, at: int) -> int:
    """``at`` moved back over the JSON whitespace before it."""
    while at > 0 and raw[at - 1] in _SPACE:
        at -= 1
    return at
