"""Script entries: what the emulator answers, validated before any request arrives.

A script is a list of JSON objects consumed in order across requests (any
route). An entry is a reply (text, reasoning, tool calls, ...), possibly cut
short, or a fault (an HTTP error or a context overflow). When the script is
empty, :func:`default_reply` answers deterministically. docs/emulator.md has the
format; a bad entry is refused up front with a sentence that says what to fix,
so a typo never turns into a confusing answer mid-test.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from tapelog._errors import JsonValueError
from tapelog.cache._api import estimate_text
from tapelog.emulator._render import Conversation
from tapelog.log import decode

__all__ = [
    "Entry",
    "Fault",
    "Reply",
    "ToolCallSpec",
    "default_reply",
    "load_script",
    "parse_entry",
    "with_output",
]

Finish = Literal["stop", "length", "tool_calls"]

_REPLY_KEYS = frozenset(
    {
        "text",
        "reasoning",
        "signature",
        "tool_calls",
        "output",
        "finish",
        "usage_output",
        "cut_after",
    }
)
_FAULT_KEYS = frozenset({"error", "overflow", "in_stream"})


@dataclass(frozen=True, slots=True)
class ToolCallSpec:
    """A tool call to answer with; ``arguments`` is raw JSON text, sent verbatim."""

    name: str
    arguments: str
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """A model answer. ``cut_after`` closes the stream after that many SSE frames.

    ``output`` is a structured answer (raw JSON text) given the way the request
    asks for it: the arguments of a call of the tool the request forces, or
    text after ``text`` when it forces none (:func:`with_output`).
    """

    text: str = ""
    reasoning: str = ""
    signature: str | None = None
    tool_calls: tuple[ToolCallSpec, ...] = ()
    finish: Finish | None = None
    usage_output: int | None = None
    cut_after: int | None = None
    output: str | None = None

    @property
    def finish_reason(self) -> Finish:
        if self.finish is not None:
            return self.finish
        return "tool_calls" if self.tool_calls else "stop"

    @property
    def output_tokens(self) -> int:
        """``usage_output`` if scripted, else the estimate of everything generated."""
        if self.usage_output is not None:
            return self.usage_output
        pieces = [self.reasoning, self.text]
        pieces.extend(c.name + c.arguments for c in self.tool_calls)
        return estimate_text("".join(pieces))

    @property
    def reasoning_tokens(self) -> int:
        return estimate_text(self.reasoning)


@dataclass(frozen=True, slots=True)
class Fault:
    """An error answer: ``overflow`` is the provider's context-length error.

    ``headers`` are extra response headers of an HTTP error answer (lower-case
    names), e.g. ``retry-after`` to test how a client honours it.
    """

    kind: Literal["error", "overflow"]
    status: int = 400
    message: str = ""
    type: str | None = None
    in_stream: bool = False
    code: str | None = None
    headers: tuple[tuple[str, str], ...] = ()


Entry = Reply | Fault


def _fail(where: str, problem: str) -> ValueError:
    return ValueError(f"{where}: {problem}")


def _str(entry: Mapping[str, Any], key: str, where: str) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str):
        raise _fail(where, f'"{key}" must be a string, not {type(value).__name__}.')
    return value


def _count(value: Any, key: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(where, f'"{key}" must be a non-negative integer, not {value!r}.')
    return value


def _tool_calls(value: Any, where: str) -> tuple[ToolCallSpec, ...]:
    if not isinstance(value, list):
        raise _fail(where, '"tool_calls" must be a list of {"name", "arguments", "id"?} objects.')
    calls: list[ToolCallSpec] = []
    for i, call in enumerate(value):
        at = f"{where}, tool_calls[{i}]"
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise _fail(at, 'each tool call needs a string "name".')
        unknown = set(call) - {"id", "name", "arguments"}
        if unknown:
            raise _fail(at, f"unknown keys {sorted(unknown)}; use id, name and arguments.")
        arguments = call.get("arguments", "{}")
        if not isinstance(arguments, str):
            raise _fail(
                at, '"arguments" must be the raw JSON text as a string, e.g. "{\\"x\\": 1}".'
            )
        call_id = call.get("id")
        if call_id is not None and not isinstance(call_id, str):
            raise _fail(at, '"id" must be a string.')
        calls.append(ToolCallSpec(call["name"], arguments, call_id))
    return tuple(calls)


def _fault(entry: Mapping[str, Any], where: str) -> Fault:
    in_stream = bool(entry.get("in_stream", False))
    if entry.get("overflow"):
        if "error" in entry:
            raise _fail(where, 'use either "overflow" or "error", not both.')
        return Fault("overflow", 400, in_stream=in_stream)
    error = entry["error"]
    if not isinstance(error, Mapping):
        raise _fail(where, '"error" must be an object like {"status": 500, "message": "..."}.')
    status = error.get("status", 500)
    if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
        raise _fail(
            where, f'"error.status" must be an HTTP error status (400-599), not {status!r}.'
        )
    unknown = set(error) - {"status", "message", "type", "code", "headers"}
    if unknown:
        raise _fail(
            where,
            f'"error" takes status, message, type, code and headers, not {sorted(unknown)}.',
        )
    message = error.get("message", "The emulator was scripted to fail this request.")
    kind, code = error.get("type"), error.get("code")
    if not all(isinstance(v, str) for v in (message, kind or "", code or "")):
        raise _fail(where, '"error.message", "error.type" and "error.code" must be strings.')
    headers = _headers(error.get("headers", {}), where)
    return Fault("error", status, message, kind, in_stream, code, headers)


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r"[\x20-\x7e\t]*")
_FRAMING = frozenset({"content-length", "content-type", "transfer-encoding"})


def _headers(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    """``error.headers``: response header names and values that HTTP accepts."""
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _fail(
            where, '"error.headers" must be an object of strings, e.g. {"retry-after": "2"}.'
        )
    pairs: list[tuple[str, str]] = []
    for name, text in value.items():
        if not _HEADER_NAME.fullmatch(name) or not _HEADER_VALUE.fullmatch(text):
            raise _fail(
                where,
                f"error header {name!r}: a name is letters, digits and !#$%&'*+.^_`|~-, a value "
                "visible ASCII and spaces (no line breaks).",
            )
        if name.lower() in _FRAMING:
            raise _fail(where, f"error header {name!r} is set by the emulator itself.")
        pairs.append((name.lower(), text))
    return tuple(pairs)


def parse_entry(entry: Any, *, where: str = "script entry") -> Entry:
    """Validate one script entry; the error names ``where`` and the fix."""
    if not isinstance(entry, Mapping):
        raise _fail(where, f"an entry must be a JSON object, not {type(entry).__name__}.")
    if "error" in entry or "overflow" in entry:
        unknown = set(entry) - _FAULT_KEYS
        if unknown:
            raise _fail(
                where, f"a fault entry takes only error/overflow/in_stream, not {sorted(unknown)}."
            )
        return _fault(entry, where)
    unknown = set(entry) - _REPLY_KEYS
    if unknown:
        allowed = ", ".join(sorted(_REPLY_KEYS | {"error", "overflow"}))
        raise _fail(where, f"unknown keys {sorted(unknown)}; allowed keys are: {allowed}.")
    finish = entry.get("finish")
    if finish is not None and finish not in ("stop", "length", "tool_calls"):
        raise _fail(where, f'"finish" must be "stop", "length" or "tool_calls", not {finish!r}.')
    signature = entry.get("signature")
    if signature is not None and not isinstance(signature, str):
        raise _fail(where, '"signature" must be a string.')
    usage = entry.get("usage_output")
    cut = entry.get("cut_after")
    output = entry.get("output")
    if output is not None and not isinstance(output, str):
        raise _fail(where, '"output" must be the raw JSON text as a string, e.g. "{\\"x\\": 1}".')
    return Reply(
        text=_str(entry, "text", where),
        reasoning=_str(entry, "reasoning", where),
        signature=signature,
        tool_calls=_tool_calls(entry.get("tool_calls", []), where),
        finish=finish,
        usage_output=None if usage is None else _count(usage, "usage_output", where),
        cut_after=None if cut is None else _count(cut, "cut_after", where),
        output=output,
    )


def with_output(reply: Reply, forced: str | None) -> Reply:
    """``reply`` with its ``output`` given as the request asks: a call of the
    ``forced`` tool with ``output`` as its arguments, else text after ``text``."""
    if reply.output is None:
        return reply
    if forced is None:
        return replace(reply, text=reply.text + reply.output, output=None)
    call = ToolCallSpec(forced, reply.output)
    return replace(reply, tool_calls=(*reply.tool_calls, call), output=None)


def load_script(path: str | Path) -> list[dict[str, Any]]:
    """Read a script file: a JSON array of entries, or JSONL (one entry a line).

    Every entry is validated; a bad one raises ``ValueError`` naming the file
    and the line (JSONL) or index (JSON array).
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        whole = decode(text, path=str(path))
    except JsonValueError:
        whole = None
    if isinstance(whole, list):
        entries = [(f"{path}, entry {i}", e) for i, e in enumerate(whole)]
    elif isinstance(whole, dict):
        entries = [(f"{path}, line 1", whole)]
    else:
        entries = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entries.append((f"{path}, line {n}", decode(line)))
            except JsonValueError as exc:
                raise ValueError(
                    f"{path}, line {n}: not valid JSON ({exc.problem}); "
                    "write a JSON array of entries or one JSON object per line."
                ) from None
    for where, entry in entries:
        parse_entry(entry, where=where)
    return [dict(e) for _, e in entries]


def default_reply(conversation: Conversation) -> Reply:
    """The deterministic answer when the script is empty.

    After tool results: a short text naming their sizes (so a test can see the
    results arrived); otherwise ``"ok: "`` and the first 60 characters of the
    last user text.
    """
    sizes = conversation.tool_result_sizes
    if sizes:
        noun = "result" if len(sizes) == 1 else "results"
        listed = ", ".join(str(s) for s in sizes)
        return Reply(text=f"done: {len(sizes)} tool {noun} ({listed} chars)")
    return Reply(text="ok: " + conversation.last_user_text[:60])
