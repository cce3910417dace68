"""What a provider reads in a request body: the normal form both sides are compared in.

The proxy forwards the bytes rebuilt from the log, never the client's own, so
it must prove that the two say the same to the model. Both are brought to a
*normal form* that keeps everything a provider reads and drops only what
providers parse the same whichever way it is written:

* the order of object keys (JSON objects are unordered), except inside the
  values a model reads verbatim (:data:`OPAQUE`: a tool's parameter schema, a
  tool call's input, a response format's schema), compared as their bytes;
* whitespace between JSON tokens (the normal form is built from decoded JSON);
* ``null`` values and absent keys (a provider reads both as "not given");
* on the chat completions wire, a message's content as the string ``"x"`` or
  as ``[{"type": "text", "text": "x"}]``, and empty content (``""``, ``[]``,
  ``null``) as no content.

The Anthropic side is stricter (``_anthropic_in``): it carries every field,
so its messages are compared with nothing dropped but ``null`` members.

Top-level fields are normalised by the family modules (``stream`` and
``stream_options`` are the proxy's own, a token limit has two spellings). Then
:func:`first_difference` names the first place where the two differ, which is
what a refused client is told.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from tapelog.log._api import encode_trusted

__all__ = ["OPAQUE", "Opaque", "first_difference", "normal", "one_text", "text_parts"]

OPAQUE: Final = frozenset({"parameters", "input_schema", "input", "schema"})
"""Keys whose values a model reads as written: compared byte for byte, key order included."""


@dataclass(frozen=True, slots=True)
class Opaque:
    """A value compared by its canonical bytes (so its key order counts)."""

    data: bytes

    def __repr__(self) -> str:
        shown = self.data[:60].decode("utf-8", "replace")
        return shown + ("..." if len(self.data) > 60 else "")


def normal(value: Any, *, drop: frozenset[str] = frozenset()) -> Any:
    """``value`` with ``null`` members and the keys in ``drop`` removed (at every
    depth), opaque values turned into :class:`Opaque`; lists keep their order."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if item is None or key in drop:
                continue
            out[key] = Opaque(encode_trusted(item)) if key in OPAQUE else normal(item, drop=drop)
        return out
    if isinstance(value, list):
        return [normal(item, drop=drop) for item in value]
    return value


def text_parts(content: Any) -> Any:
    """Message content as a list of parts: a string is one text part, empty
    content (``""``, ``None``, ``[]``) is none; any other value is kept (and so
    differs from what the proxy would send, if it is not a list)."""
    if content is None or content == "" or content == []:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content


def one_text(value: Any) -> str | None:
    """The text of a string or of a list of exactly one text part (``None`` when
    it is empty): the only forms of a system prompt the log keeps as one text.
    Anything else raises ``ValueError``; the caller says why in its API's words."""
    if isinstance(value, str):
        return value or None
    if (
        isinstance(value, list)
        and len(value) == 1
        and isinstance(value[0], Mapping)
        and value[0].get("type") == "text"
        and isinstance(value[0].get("text"), str)
    ):
        text: str = value[0]["text"]
        return text or None
    raise ValueError("not one text")


def first_difference(client: Any, rebuilt: Any, path: str) -> str | None:
    """Where the normal forms differ first, as a sentence; ``None`` when equal.

    ``client`` is what the client sent, ``rebuilt`` what the proxy would send
    (both in normal form).
    """
    if client == rebuilt:
        return None
    if isinstance(client, dict) and isinstance(rebuilt, dict):
        for key in client:
            if key not in rebuilt:
                return f"{path}.{key} cannot be represented in the log (it would be dropped)"
        for key in rebuilt:
            if key not in client:
                return f"{path}.{key} would be added by the log's wire format"
        for key in client:
            found = first_difference(client[key], rebuilt[key], f"{path}.{key}")
            if found is not None:
                return found
    if isinstance(client, list) and isinstance(rebuilt, list):
        for i, (mine, theirs) in enumerate(zip(client, rebuilt, strict=False)):
            found = first_difference(mine, theirs, f"{path}[{i}]")
            if found is not None:
                return found
        if len(client) != len(rebuilt):
            return (
                f"{path} has {len(client)} items, but the log's wire format would send "
                f"{len(rebuilt)}"
            )
    return f"{path} would change from {_shown(client)} to {_shown(rebuilt)}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
