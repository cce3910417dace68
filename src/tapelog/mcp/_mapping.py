"""From MCP to what the loop logs: tool names, schemas and results (pure, no SDK).

**Names.** A server's tool ``T`` is offered as ``<server>__T``. Server names
never contain ``__`` and never end in ``_``, so the first ``__`` always
separates the server from the tool, and two servers can never produce the
same name. A tool name that does not fit tapelog's rule (1 to 64 of
``[a-zA-Z0-9_-]``; MCP allows ``.`` and up to 128 characters) is made to fit
deterministically: characters outside the rule become ``_``, and the name is
cut and given ``_`` plus 8 hex digits of the SHA-256 of the original name, so
the same tool always gets the same name.

**Schemas.** The schema the model sees is ``{"name", "description",
"parameters"}``: ``parameters`` is the server's ``inputSchema`` with object
keys sorted at every level (arrays keep their order), deep-frozen. Sorting
makes the bytes independent of the key order a server happens to emit, so
identical tools give identical request bytes across restarts. Descriptions
are cut at a bound; a tool whose schema is still too large is not offered.

**Results.** Tool results are text on every wire tapelog speaks, so MCP
content is rendered as text: text parts as they are, other parts as a short
bracketed description (``[image: image/png, 1234 bytes, not shown]``), an
embedded text resource with its text, ``structuredContent`` as canonical JSON
when no text part carries it. The whole result is cut at a bound.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tapelog.log import encode
from tapelog.log._api import FrozenDict, encode_str, freeze

__all__ = [
    "canonical_schema",
    "namespaced",
    "render_result",
    "truncate",
]

_ALLOWED = re.compile(r"[a-zA-Z0-9_-]")
_NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")
MAX_TOOL_NAME = 64
_HASH_DIGITS = 8


def namespaced(server: str, tool: str) -> str:
    """The name tapelog offers ``server``'s tool ``tool`` under (see the module doc)."""
    full = f"{server}__{tool}"
    if _NAME_RE.fullmatch(full):
        return full
    safe = "".join(c if _ALLOWED.fullmatch(c) else "_" for c in tool)
    tag = hashlib.sha256(tool.encode("utf-8")).hexdigest()[:_HASH_DIGITS]
    room = MAX_TOOL_NAME - len(server) - 2 - 1 - _HASH_DIGITS
    return f"{server}__{safe[:room]}_{tag}"


def _sorted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def canonical_schema(input_schema: Mapping[str, Any], *, path: str) -> FrozenDict:
    """``input_schema`` with keys sorted at every level, deep-frozen (lossless JSON only)."""
    frozen: FrozenDict = freeze(_sorted(input_schema), path=path)
    return frozen


def truncate(text: str, limit: int, what: str = "result") -> str:
    """``text`` cut to ``limit`` characters, saying so at the end."""
    if len(text) <= limit:
        return text
    return (
        f"{text[:limit]}\n[truncated: the {what} had {len(text)} characters; "
        f"the first {limit} are shown]"
    )


def _size(data: Any) -> str:
    """The decoded size of base64 ``data``, for a description."""
    if not isinstance(data, str):
        return "no data"
    n = len(data) * 3 // 4 - data[-2:].count("=")
    return f"{max(n, 0)} bytes"


def _bracket(*parts: Any) -> str:
    shown = [str(p) for p in parts if p not in (None, "")]
    return "[" + ", ".join(shown) + "]"


def _resource(resource: Mapping[str, Any]) -> str:
    uri, mime = resource.get("uri"), resource.get("mimeType")
    text = resource.get("text")
    if isinstance(text, str):
        return _bracket(f"resource: {uri}", mime) + "\n" + text
    return _bracket(f"resource: {uri}", mime, _size(resource.get("blob")), "binary, not shown")


def _part(part: Mapping[str, Any]) -> str:
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", ""))
    if kind in ("image", "audio"):
        return _bracket(f"{kind}: {part.get('mimeType')}", _size(part.get("data")), "not shown")
    if kind == "resource" and isinstance(part.get("resource"), Mapping):
        return _resource(part["resource"])
    if kind == "resource_link":
        title = part.get("title") or part.get("name")
        link = _bracket(f"resource link: {title}", part.get("uri"), part.get("mimeType"))
        described = part.get("description")
        return f"{link} {described}" if described else link
    return _bracket(f"{kind} content, not shown")


def render_result(result: Mapping[str, Any], *, limit: int) -> str:
    """An MCP ``CallToolResult`` (as JSON) rendered as the text the model reads."""
    content: Sequence[Any] = result.get("content") or ()
    parts = [_part(p) for p in content if isinstance(p, Mapping)]
    structured = result.get("structuredContent")
    has_text = any(isinstance(p, Mapping) and p.get("type") == "text" for p in content)
    if structured is not None and not has_text:
        parts.append(encode_str(structured, path="structuredContent"))
    text = "\n".join(parts) if parts else "(no content)"
    return truncate(text, limit)


def schema_bytes(schema: Any) -> int:
    """The encoded size of a tool schema (what it adds to every request)."""
    return len(encode(schema))
