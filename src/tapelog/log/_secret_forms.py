"""The forms a secret can be echoed in, and how to find them (pure functions).

:mod:`tapelog.log._redact` compiles these for the registered secrets: the
literal forms (as it is, JSON-escaped, base64 at each byte alignment,
URL-encoded) are searched as substrings, the mixed escapes (any character as
``\\uXXXX`` or ``%XX``, at any JSON depth) by one pattern. Each form is also
found without its first one to three characters (as long as eight remain):
what the second piece of a streamed text starts with when a secret is split
right after its first characters. :func:`decode_prefix` reads the end of a
text as the start of an escaped form, so a stream can hold back a secret's
first half in any of its forms.
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from typing import Final

import orjson

__all__ = [
    "CUT_AT_MOST",
    "MIN_SECRET_LENGTH",
    "base64_forms",
    "cut",
    "decode_prefix",
    "escaped_pattern",
    "literal_forms",
    "triggers",
    "unescape_loosely",
]

MIN_SECRET_LENGTH: Final = 8
"""Shorter values are never registered: too many false hits in ordinary text."""

CUT_AT_MOST: Final = 3
"""A form is also found without up to this many leading characters."""

_SHORT_ESCAPES: Final = {"\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t"}
_UNESCAPE: Final = {v: k for k, v in _SHORT_ESCAPES.items()}
_ANY_ESCAPE: Final = re.compile(r"\\+(?:u([0-9a-fA-F]{4})|(.))", re.DOTALL)
_URLSAFE: Final = str.maketrans("+/", "-_")
_LOWER_HEX: Final = re.compile(r"%[0-9A-F]{2}")
_HEX: Final = frozenset("0123456789abcdefABCDEF")


def cut(form: str) -> int:
    """How many leading characters ``form`` is also found without."""
    return max(0, min(CUT_AT_MOST, len(form) - MIN_SECRET_LENGTH))


def base64_forms(secret: str) -> set[str]:
    """The base64 characters that encode ``secret`` alone, at each byte alignment.

    In a blob the secret starts at a byte offset of 0, 1 or 2 modulo 3; the
    characters kept are those whose six bits all come from the secret's bytes.
    """
    data = secret.encode("utf-8")
    forms: set[str] = set()
    for offset in range(3):
        blob = base64.b64encode(bytes(offset) + data).decode("ascii")
        start = -(-4 * offset // 3)  # ceil(8 * offset / 6)
        end = 8 * (offset + len(data)) // 6
        piece = blob[start:end]
        forms.add(piece)
        forms.add(piece.translate(_URLSAFE))
    return {form for form in forms if form}


def _url_forms(secret: str) -> set[str]:
    quoted = urllib.parse.quote(secret, safe="")
    plus = urllib.parse.quote_plus(secret, safe="")
    lower = (_LOWER_HEX.sub(lambda m: m.group().lower(), q) for q in (quoted, plus))
    return {quoted, plus, *lower}


def literal_forms(secret: str) -> set[str]:
    """Every literal form replaced as a substring (the escaped ones are also
    found by :func:`escaped_pattern`): as it is, JSON-escaped, URL-encoded,
    base64, and the raw and base64 forms without their first characters."""
    escaped = orjson.dumps(secret).decode("utf-8")[1:-1]
    forms = {secret, escaped, escaped.replace("/", "\\/")}
    forms |= _url_forms(secret)
    for form in (secret, *base64_forms(secret)):
        forms.add(form)
        forms.update(form[k:] for k in range(1, cut(form) + 1))
    return {form for form in forms if form}


def _hex(digits: str) -> str:
    """A pattern for the hex ``digits``, each in either case."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in digits)


def escaped_pattern(secret: str) -> str:
    """A pattern for ``secret`` with any of its characters JSON-escaped (at any
    depth) or URL-encoded, also without its first one to three characters
    (:func:`cut`)."""
    parts: list[str] = []
    for char in secret:
        code = ord(char)
        alternatives = [re.escape(char)]
        if code > 0xFFFF:
            high = 0xD800 + ((code - 0x10000) >> 10)
            low = 0xDC00 + ((code - 0x10000) & 0x3FF)
            alternatives.append(rf"\\+u{_hex(f'{high:04x}')}\\+u{_hex(f'{low:04x}')}")
        else:
            alternatives.append(rf"\\+u{_hex(f'{code:04x}')}")
        if char in '"\\/':
            alternatives.append(r"\\+" + re.escape(char))
        short = _SHORT_ESCAPES.get(char)
        if short is not None:
            alternatives.append(r"\\+" + short)
        alternatives.append("".join("%" + _hex(f"{byte:02x}") for byte in char.encode("utf-8")))
        if char == " ":
            alternatives.append(r"\+")
        parts.append("(?:" + "|".join(alternatives) + ")")
    start = ""
    for part in parts[: cut(secret)]:  # ((c0)? c1)? c2)? ...: any of the first few may be missing
        start = f"(?:{start}{part})?"
    return start + "".join(parts[cut(secret) :])


def triggers(secrets: tuple[str, ...]) -> tuple[str, ...]:
    """What a text holding one of ``secrets`` with an escaped character contains.

    ``\\n`` and the like are common in text (code, JSON): they trigger the
    escaped-pattern search only when a secret has such a character.
    """
    found = {"\\u", "%"}
    for secret in secrets:
        found.update("\\" + c for c in secret if c in '"\\/')
        found.update("\\" + _SHORT_ESCAPES[c] for c in secret if c in _SHORT_ESCAPES)
        if " " in secret:
            found.add("+")
    return tuple(sorted(found))


def _pair_surrogates(text: str) -> str:
    """Join the surrogate halves ``\\uD83D\\uDE00`` escapes leave behind."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def unescape_loosely(text: str) -> tuple[str, ...]:
    """``text`` with every JSON escape undone, however deeply nested, and then
    URL-decoded with and without ``+`` for a space (a prefilter: whether the
    escaped pattern can match at all)."""

    def one(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return chr(int(match.group(1), 16))
        char = match.group(2)
        return _UNESCAPE.get(char, char)

    loose = _ANY_ESCAPE.sub(one, text) if "\\" in text else text
    if "\\u" in text:
        loose = _pair_surrogates(loose)
    if "%" not in loose:
        return (loose,)
    return urllib.parse.unquote(loose), urllib.parse.unquote_plus(loose)


class _Prefix:
    """Decoded characters, kept only while some secret starts with them."""

    __slots__ = ("alive", "chars")

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self.alive = secrets
        self.chars: list[str] = []

    def add(self, text: str) -> bool:
        """Append ``text``; whether some secret still starts with what was decoded."""
        for char in text:
            n = len(self.chars)
            self.alive = tuple(s for s in self.alive if len(s) > n and s[n] == char)
            if not self.alive:
                return False
            self.chars.append(char)
        return True

    def result(self, open_escape: bool) -> tuple[str, bool]:
        return "".join(self.chars), open_escape


def decode_prefix(tail: str, secrets: tuple[str, ...]) -> tuple[str, bool] | None:
    """``tail`` read as the start of an escaped form of one of ``secrets``: what
    it decodes to, and whether it ends inside an escape (``\\``, ``\\u00``,
    ``%4``), which the next piece completes. ``None`` as soon as no secret
    starts with what it decodes to.

    The escapes are those :func:`escaped_pattern` finds: ``\\uXXXX`` (a
    surrogate pair as two) and the short JSON escapes behind any number of
    backslashes, and ``%XX`` UTF-8 bytes.
    """
    out = _Prefix(secrets)
    pending = bytearray()  # %XX bytes not yet a whole UTF-8 character
    high = ""  # a \uD800-\uDBFF escape waiting for its low half
    i, n = 0, len(tail)
    while i < n:
        char = tail[i]
        if char == "%":
            digits = tail[i + 1 : i + 3]
            if all(d in _HEX for d in digits):
                if len(digits) < 2:
                    return out.result(True)
                pending.append(int(digits, 16))
                i += 3
                try:
                    decoded = pending.decode("utf-8")
                except UnicodeDecodeError:
                    continue  # more bytes of the character follow
                pending.clear()
                if not out.add(decoded):
                    return None
                continue
        if pending:  # a character's bytes cut short by something else
            return None
        if char == "\\":
            j = i
            while j < n and tail[j] == "\\":
                j += 1
            if j == n:
                return out.result(True)
            escape = tail[j]
            if escape == "u":
                digits = tail[j + 1 : j + 5]
                if all(d in _HEX for d in digits):
                    if len(digits) < 4:
                        return out.result(True)
                    code = chr(int(digits, 16))
                    i = j + 5
                    if "\ud800" <= code <= "\udbff":
                        high = code
                        continue
                    if high:
                        code, high = _pair_surrogates(high + code), ""
                    if not out.add(code):
                        return None
                    continue
            decoded_char = _UNESCAPE.get(escape, escape)
            i = j + 1
        else:
            decoded_char = char
            i += 1
        if high or not out.add(decoded_char):
            return None
    return out.result(bool(pending) or bool(high))
