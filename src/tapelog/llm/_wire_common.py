"""Small helpers both wire serializers share: config checks and block access."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tapelog._errors import EventError, HeaderError

__all__ = ["check_extras", "joined_text", "logged_target", "refuse_block", "tool_result_text"]


def logged_target(config: Any, url: str, headers: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """Where a request goes and with which headers, as its logged config says:
    ``config.wire.query`` (a client's query string, e.g. ``beta=true``) is
    appended to ``url`` and ``config.headers`` (``anthropic-beta``...) override
    ``headers``, so what the model reads comes from the log (docs/format.md)."""
    query = config.wire.get("query")
    if isinstance(query, str) and query:
        url = f"{url}?{query}"
    return url, {**headers, **config.headers}


def check_extras(extras: Mapping[str, Any], reserved: Iterable[str], wire: str) -> None:
    """Refuse extras that would override a field the wire writes itself.

    Extras are sent after the standard fields; a duplicate key would make the
    body ambiguous (and its meaning depend on the provider's JSON parser).
    """
    taken = [key for key in reserved if key in extras]
    if taken:
        raise HeaderError(
            f"config.extras sets {taken[0]!r}, which the {wire} wire writes itself; "
            "use the matching config field (or leave it out) instead of an extra."
        )


def joined_text(blocks: Sequence[Mapping[str, Any]], btype: str, sep: str = "") -> str:
    """The ``text`` of every block of type ``btype``, joined by ``sep``."""
    return sep.join(block["text"] for block in blocks if block["type"] == btype)


def refuse_block(wire: str, role: str, block: Mapping[str, Any], where: str) -> EventError:
    """The error for a content block a wire cannot express in a message of ``role``."""
    return EventError(
        f"{where}: the {wire} wire cannot send a {block.get('type')!r} block in a {role} "
        "message; only the blocks listed in docs/providers.md can be sent in that role."
    )


def tool_result_text(block: Mapping[str, Any], wire: str, where: str) -> str:
    """A tool result's content as one string (text blocks joined by newlines)."""
    content = block["content"]
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for i, part in enumerate(content):
        if part.get("type") != "text":
            raise refuse_block(wire, "tool", part, f"{where}.content[{i}]")
        parts.append(part["text"])
    return "\n".join(parts)
