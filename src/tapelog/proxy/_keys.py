"""Keys of neutral messages and digests of message prefixes, for session matching.

A client's copy of a conversation is not always byte-identical to the log's:
it may parse and re-serialize tool arguments (``{"a": 1}`` becomes
``{"a":1}``), drop reasoning it was given, or trim whitespace. The *loose key*
of a message ignores exactly those differences, so a request still finds the
conversation it continues; whether the messages are the same to the model is
decided afterwards, precisely (``_matching``), and a difference becomes a
logged replace.

A prefix of a conversation is named by a chain of digests, ``d[i] =
H(d[i-1] + key[i])``, so one pass over a request's messages gives the digest
of every prefix, and a dictionary lookup per prefix finds the sessions that
were at that point. :class:`SurfaceChain` keeps the chain of a session's
projected history up to date at the cost of what is new (a replace recomputes
the digests, not the keys of unchanged nodes).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from tapelog._errors import JsonValueError
from tapelog.log import decode
from tapelog.log._api import History, encode_trusted

__all__ = ["SurfaceChain", "chain_of", "extend_chain", "loose_key"]

_SIZE = 16


def _sorted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _arguments(text: str) -> Any:
    """Tool-call arguments as a value with sorted keys (the raw text if not JSON)."""
    try:
        return ["json", _sorted(decode(text))]
    except JsonValueError:
        return ["text", text]


def _content(content: Any) -> Any:
    if isinstance(content, str):
        return content.strip()
    parts: list[Any] = []
    text: list[str] = []
    for block in content:
        btype = block.get("type")
        if btype == "reasoning":
            continue
        if btype == "text":
            text.append(block["text"].strip())
        elif btype == "tool_call":
            parts.append(["call", block["id"], block["name"], _arguments(block["arguments"])])
        elif btype == "tool_result":
            parts.append(
                ["result", block["tool_call_id"], _content(block["content"]), block["is_error"]]
            )
        elif btype == "item":
            _item(block["item"], text, parts)
        else:
            parts.append(_sorted(block))
    return ["".join(text), parts]


def _item(item: Any, text: list[str], parts: list[Any]) -> None:
    """A Responses item kept whole (an ``item`` block) keys as the block the log
    would make of it without its extra fields (``id``, ``status``...): a client
    that sends back a function call with its ``id`` still continues its session."""
    kind = item.get("type", "message") if isinstance(item, Mapping) else None
    if kind == "reasoning":
        return
    if kind == "function_call" and isinstance(item.get("arguments"), str):
        parts.append(["call", item.get("call_id"), item.get("name"), _arguments(item["arguments"])])
    elif kind == "message" and item.get("role") == "assistant":
        content = item.get("content")
        for part in content if isinstance(content, list) else ():
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                text.append(part["text"].strip())
    else:
        parts.append(_sorted(item))


def loose_key(message: Mapping[str, Any]) -> bytes:
    """The key of a neutral message that ignores what clients commonly rewrite:
    reasoning blocks, whitespace around text, how text is split into blocks,
    and the formatting and key order of tool arguments."""
    data = encode_trusted([message["role"], _content(message["content"])])
    return hashlib.blake2b(data, digest_size=_SIZE).digest()


def _link(previous: bytes, key: bytes) -> bytes:
    return hashlib.blake2b(previous + key, digest_size=_SIZE).digest()


def chain_of(keys: Sequence[bytes]) -> list[bytes]:
    """The digest of every prefix of a message list: ``out[i]`` names ``keys[: i + 1]``."""
    out: list[bytes] = []
    extend_chain(out, keys)
    return out


def extend_chain(chain: list[bytes], keys: Sequence[bytes]) -> None:
    """Bring ``chain``, the digests of a prefix of ``keys``, to all of ``keys``."""
    previous = chain[-1] if chain else b""
    for i in range(len(chain), len(keys)):
        previous = _link(previous, keys[i])
        chain.append(previous)


class SurfaceChain:
    """The prefix digests of a session's projected history, updated incrementally."""

    def __init__(self) -> None:
        self.chain: list[bytes] = []
        self._keys: dict[int, bytes] = {}  # seq -> loose key of its message
        self._history: History | None = None

    def update(self, history: History) -> list[bytes]:
        """Bring the chain to ``history`` (what was appended since the last
        update; everything after a replace); the chain, one digest per message."""
        start = 0
        last = self._history
        if last is not None and history.extends(last):
            start = len(last)
        else:
            self.chain = []
        previous = self.chain[-1] if self.chain else b""
        keys = self._keys
        for i in range(start, len(history)):
            seq, message = history[i]
            key = keys.get(seq)
            if key is None:
                key = keys[seq] = loose_key(message)
            previous = _link(previous, key)
            self.chain.append(previous)
        if start == 0 and len(keys) > 2 * len(history) + 64:  # nodes shadowed by replaces
            live = set(history.seq_list())
            self._keys = {s: k for s, k in keys.items() if s in live}
        self._history = history
        return self.chain

    def key_at(self, history: History, index: int) -> bytes:
        """The loose key of message ``index`` of ``history`` (after :meth:`update`)."""
        seq, message = history[index]
        key = self._keys.get(seq)
        return key if key is not None else loose_key(message)
