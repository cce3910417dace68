"""What a client changed in a message it sent again: pure classification.

An agent that tapelog does not run (one behind ``tapelog proxy``) sends its
whole history with every request. When it sends an earlier message other than
it sent it before, the log holds a surface ``replace`` from that message on,
and the cache breaks there. To fix their agent, people need to know *what*
changed, in the words of the usual culprits:

* ``timestamp``: only date- or time-like tokens differ (a clock rendered
  into a message or the system prompt);
* ``arguments-reserialized``: a tool call's ``arguments`` text differs but
  decodes to the same JSON value (whitespace, key order, escapes);
* ``reasoning-dropped``: reasoning blocks the original had are gone;
* ``content-edited``: anything else (the field and a short excerpt say where);
* ``removed`` / ``inserted``: a whole message left or joined the history.

Everything here is a pure function of frozen log values. Excerpts are bounded
and printable (control and format characters shown as escapes), so a report
only has to escape them for its medium (HTML, terminal).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Any, Final

from tapelog.log import decode
from tapelog.log._api import encode_trusted as encode

__all__ = [
    "EDIT_KINDS",
    "TIMESTAMP",
    "MessageChange",
    "TextChange",
    "diff_excerpts",
    "excerpt",
    "message_change",
    "message_text",
    "same_json_value",
    "text_change",
]

EDIT_KINDS: Final = (
    "timestamp",
    "arguments-reserialized",
    "reasoning-dropped",
    "content-edited",
    "removed",
    "inserted",
)

EXCERPT_CHARS: Final = 80
"""The most characters an excerpt has (escapes and the ``…`` marks included)."""
_CONTEXT: Final = 20
"""Unchanged characters shown on each side of an edit."""

# --- timestamps -------------------------------------------------------------------

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_WEEKDAY = (
    r"(?:Mon(?:day)?|Tue(?:s(?:day)?)?|Wed(?:nesday)?|Thu(?:r(?:s(?:day)?)?)?|Fri(?:day)?"
    r"|Sat(?:urday)?|Sun(?:day)?)"
)
_ZONE = r"(?:\s?(?:Z|UTC|GMT|[+-]\d{2}:?\d{2}))"
_CLOCK = r"\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:\s?[AaPp]\.?[Mm]\.?)?" + _ZONE + "?"
_DATE_WORDS = (
    rf"(?:{_WEEKDAY},?\s+)?"
    rf"(?:\d{{1,2}}\s+{_MONTH}\.?,?\s+\d{{4}}|{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}})"
    rf"(?:,?\s+(?:at\s+)?{_CLOCK})?"
)
_CTIME = rf"{_WEEKDAY}\s+{_MONTH}\s+\d{{1,2}}\s+{_CLOCK}\s+\d{{4}}"
_ISO = rf"\d{{4}}-\d{{2}}-\d{{2}}(?:[T ]{_CLOCK})?"
_NUMERIC_DATE = r"\d{4}/\d{1,2}/\d{1,2}|\d{1,2}/\d{1,2}/\d{2,4}|\d{1,2}\.\d{1,2}\.\d{4}"
_EPOCH = r"1\d{9}(?:\d{3}(?:\d{3})?)?(?:\.\d{1,9})?"
_DAY_NAME = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"

TIMESTAMP: Final = re.compile(
    rf"(?<!\w)(?:{_DATE_WORDS}|{_CTIME}|{_ISO}|{_NUMERIC_DATE}|{_EPOCH}|{_CLOCK}|{_DAY_NAME})(?!\w)"
)
"""Date- and time-like tokens: ISO 8601 dates and times, mail-header and ``ctime``
dates, ``May 1, 2024`` / ``1 May 2024``, numeric dates with slashes (or dots and
a four-digit year), clock times, weekday names, and epoch seconds or
milliseconds from 2001 to 2033 (ten or thirteen digits starting with 1)."""


# --- excerpts -------------------------------------------------------------------------

_ESCAPES: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _printable(text: str) -> str:
    """Control, format and separator characters as escapes; everything else as is."""
    out: list[str] = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` printable and at most ``limit`` characters (a cut ends in ``…``)."""
    shown = _printable(text[: limit + 1])
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _tail(text: str, limit: int) -> str:
    """The last characters of ``text``, printable, at most ``limit`` (a cut starts with ``…``)."""
    shown = _printable(text[-(limit + 1) :])
    return shown if len(shown) <= limit else "…" + shown[-(limit - 1) :]


def diff_excerpts(old: str, new: str, *, limit: int = EXCERPT_CHARS) -> tuple[str, str]:
    """Where two texts differ, each with a little unchanged context around the change."""
    start = 0
    top = min(len(old), len(new))
    while start < top and old[start] == new[start]:
        start += 1
    end = 0
    while end < top - start and old[len(old) - 1 - end] == new[len(new) - 1 - end]:
        end += 1
    before = _tail(old[:start], _CONTEXT) if start else ""

    def one(text: str) -> str:
        middle, after = text[start : len(text) - end], text[len(text) - end :]
        after_shown = excerpt(after, _CONTEXT) if after else ""
        room = max(limit - len(before) - len(after_shown), 8)
        shown = before + excerpt(middle, room) + after_shown
        return shown if len(shown) <= limit else shown[: limit - 1] + "…"

    return one(old), one(new)


# --- texts and JSON ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextChange:
    """How one text became another: ``timestamp`` or ``edited``, with excerpts."""

    what: str
    old: str
    new: str


def text_change(old: str, new: str) -> TextChange | None:
    """``None`` when equal; ``timestamp`` when only date/time tokens differ.

    ``TIMESTAMP`` has no capturing group, so splitting on it gives the text
    around the tokens: equal splits mean that only tokens changed.
    """
    if old == new:
        return None
    if TIMESTAMP.split(old) == TIMESTAMP.split(new):
        for a, b in zip(TIMESTAMP.findall(old), TIMESTAMP.findall(new), strict=True):
            if a != b:
                return TextChange("timestamp", excerpt(a), excerpt(b))
    return TextChange("edited", *diff_excerpts(old, new))


def _json_key(value: Any) -> Any:
    """A comparable form of a JSON value: key order ignored, numbers by value,
    booleans apart from numbers."""
    if isinstance(value, Mapping):
        return ("o", tuple(sorted((k, _json_key(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("a", tuple(_json_key(v) for v in value))
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", value)
    if value is None:
        return ("z", None)
    return ("s", value)


def same_json_value(old: str, new: str) -> bool:
    """Whether two JSON texts hold the same value (``False`` if either is not JSON)."""
    try:
        a, b = decode(old), decode(new)
    except Exception:  # not JSON (a cut or hand-made argument): not a re-serialization
        return False
    return bool(_json_key(a) == _json_key(b))


# --- messages ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Finding:
    what: str
    field: str
    old: str | None = None
    new: str | None = None
    extra: Mapping[str, Any] = _field(default_factory=dict)


def _encoded(value: Any) -> str:
    return encode(value).decode("utf-8")


def _compare(path: str, a: Any, b: Any, out: list[_Finding]) -> None:
    """Append what differs between two JSON values of a message (``a`` old, ``b`` new)."""
    if encode(a) == encode(b):
        return
    if isinstance(a, str) and isinstance(b, str):
        change = text_change(a, b)
        assert change is not None
        what = "timestamp" if change.what == "timestamp" else "content-edited"
        out.append(_Finding(what, path, change.old, change.new))
    elif isinstance(a, Mapping) and isinstance(b, Mapping):
        _compare_objects(path, a, b, out)
    elif isinstance(a, list | tuple) and isinstance(b, list | tuple):
        _compare_lists(path, a, b, out)
    else:
        out.append(_Finding("content-edited", path, *diff_excerpts(_encoded(a), _encoded(b))))


def _compare_objects(
    path: str, a: Mapping[str, Any], b: Mapping[str, Any], out: list[_Finding]
) -> None:
    if a.get("type") != b.get("type"):
        out.append(
            _Finding(
                "content-edited",
                f"{path}.type",
                excerpt(str(a.get("type"))),
                excerpt(str(b.get("type"))),
            )
        )
        return
    keys = [*a, *(k for k in b if k not in a)]
    differing = [k for k in keys if k not in a or k not in b or encode(a[k]) != encode(b[k])]
    if not differing:  # the same fields in another order
        out.append(
            _Finding(
                "content-edited", path, "key order: " + ", ".join(a), "key order: " + ", ".join(b)
            )
        )
        return
    for key in differing:
        where = f"{path}.{key}"
        if key not in a or key not in b:
            old = excerpt(_encoded(a[key])) if key in a else None
            new = excerpt(_encoded(b[key])) if key in b else None
            out.append(_Finding("content-edited", where, old, new))
        elif (
            key == "arguments"
            and a.get("type") == "tool_call"
            and isinstance(a[key], str)
            and isinstance(b[key], str)
            and same_json_value(a[key], b[key])
        ):
            extra = {"tool": str(b.get("name", "")), "call_id": str(b.get("id", ""))}
            out.append(
                _Finding("arguments-reserialized", where, *diff_excerpts(a[key], b[key]), extra)
            )
        else:
            _compare(where, a[key], b[key], out)


def _is_reasoning(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "reasoning"


def _drop_reasoning(
    path: str, a: Sequence[Any], b: Sequence[Any], out: list[_Finding]
) -> list[int]:
    """Indexes of ``a`` to compare with ``b`` once the reasoning ``b`` lacks is taken out."""
    old_r = [i for i, x in enumerate(a) if _is_reasoning(x)]
    new_r = [x for x in b if _is_reasoning(x)]
    if len(new_r) >= len(old_r):
        return list(range(len(a)))
    kept: list[int] = []
    pending = [encode(x) for x in new_r]
    for i in old_r:  # keep the old reasoning blocks the new list still has, in order
        if pending and encode(a[i]) == pending[0]:
            kept.append(i)
            pending.pop(0)
    if pending:  # reasoning changed as well as dropped: keep the first ones, positionally
        kept = old_r[: len(new_r)]
    dropped = [i for i in old_r if i not in kept]
    first = a[dropped[0]]
    text = str(first.get("text", "")) or str(first.get("data", ""))
    extra = {"blocks": len(dropped)}
    out.append(_Finding("reasoning-dropped", f"{path}[{dropped[0]}]", excerpt(text), None, extra))
    gone = set(dropped)
    return [i for i in range(len(a)) if i not in gone]


def _compare_lists(path: str, a: Sequence[Any], b: Sequence[Any], out: list[_Finding]) -> None:
    indexes = _drop_reasoning(path, a, b, out)
    for j, i in enumerate(indexes[: len(b)]):
        _compare(f"{path}[{j}]", a[i], b[j], out)
    for i in indexes[len(b) :]:
        out.append(_Finding("content-edited", f"{path}[{i}]", _block_text(a[i]), None))
    for j in range(len(indexes), len(b)):
        out.append(_Finding("content-edited", f"{path}[{j}]", None, _block_text(b[j])))


def _block_text(value: Any) -> str:
    """A short readable form of a content value: a block's text, a call, or its JSON."""
    if isinstance(value, str):
        return excerpt(value)
    if isinstance(value, Mapping):
        kind = value.get("type")
        if kind == "text" and isinstance(value.get("text"), str):
            return excerpt(value["text"])
        if kind == "tool_call":
            return excerpt(f"{value.get('name')}({value.get('arguments')})")
        if kind == "tool_result":
            return _block_text(value.get("content"))
        if kind == "reasoning":
            return excerpt(f"reasoning: {value.get('text', '')}")
    if isinstance(value, list | tuple) and value:
        return _block_text(value[0])
    return excerpt(_encoded(value))


def message_text(message: Mapping[str, Any]) -> str:
    """A short printable excerpt of a message (its first block's text)."""
    return _block_text(message.get("content"))


# --- one message, a history ---------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageChange:
    """One message of a request that differs from what the client sent before.

    ``message`` is the message's 1-based position in the request (the header's
    prefix messages first, then the history; the system prompt is not a
    message): in the newer request, or for ``removed`` in the older one.
    ``seq`` is the node the older request showed there, ``by`` the node that
    now stands there (``None`` for an inserted / removed message).
    """

    message: int
    role: str
    seq: int | None
    by: int | None
    what: str
    field: str | None = None
    """Where in the message: ``content[1].arguments``, ``role``, ..."""
    old: str | None = None
    new: str | None = None
    extra: Mapping[str, Any] = _field(default_factory=dict)
    also: tuple[str, ...] = ()
    """Other kinds of change found in the same message."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "message": self.message,
            "role": self.role,
            "seq": self.seq,
            "by": self.by,
            "what": self.what,
            "field": self.field,
            "old": self.old,
            "new": self.new,
        }
        out.update(self.extra)
        if self.also:
            out["also"] = list(self.also)
        return out


def message_change(
    old: Mapping[str, Any], new: Mapping[str, Any], *, message: int, seq: int | None, by: int | None
) -> MessageChange | None:
    """How ``new`` differs from ``old`` (neutral messages), or ``None`` if equal."""
    if encode(old) == encode(new):
        return None
    role = str(new.get("role"))
    findings: list[_Finding] = []
    if old.get("role") != new.get("role"):
        findings.append(
            _Finding("content-edited", "role", excerpt(str(old.get("role"))), excerpt(role))
        )
    else:
        _compare("content", old.get("content"), new.get("content"), findings)
    if not findings:  # the message object itself differs only in key order
        findings.append(_Finding("content-edited", "message", "key order", "key order"))
    primary = next((f for f in findings if f.what == "content-edited"), findings[0])
    also = tuple(dict.fromkeys(f.what for f in findings if f.what != primary.what))
    return MessageChange(
        message=message,
        role=role,
        seq=seq,
        by=by,
        what=primary.what,
        field=primary.field,
        old=primary.old,
        new=primary.new,
        extra=primary.extra,
        also=also,
    )
