"""Known secrets, and their redaction from every text that can be logged or shown.

Whoever reads a secret registers it (:func:`register_secret`): the LLM clients
when they read an API key from the environment, the PostgreSQL store when its
connection string holds a password. From then on :func:`redact` replaces the
secret with :data:`REDACTED` wherever it appears, in any of the forms a
provider, a tool or a model may echo it in:

* as it is;
* JSON-escaped: the escaped string content (``\\"``, ``\\\\``, control
  characters), ``/`` written ``\\/``, any character written ``\\uXXXX`` (hex
  digits in either case), and the same escapes nested any number of times
  (JSON inside a JSON string);
* base64, standard and URL-safe alphabets, at each of the three byte
  alignments, so a secret inside a larger base64 blob is found too (the
  characters that also depend on the neighbouring bytes are not part of the
  match, so a character or two around the marker may remain);
* URL-encoded: any of its characters written ``%XX`` (UTF-8 bytes, either hex
  case), ``+`` for a space; escapes of both kinds may be mixed;
* without its first one to three characters (as long as eight remain), as it
  is: what the second piece of a streamed text holds when a secret is split
  right after its first characters (see :func:`secret_prefix_length`).

The log's one choke point is :func:`tapelog.log.freeze`: every string of every
logged event goes through it (``Session.append`` freezes what it is given), so
a registered secret never enters the log, and requests, which are rebuilt from
the log, carry the redacted text too.

Secrets shorter than :data:`MIN_SECRET_LENGTH` characters are not registered:
a few characters occur by chance in ordinary text, and blanking them would
garble it. The registry is process-wide and only grows (:func:`forget_secrets`
empties it, for tests). With no secret registered :func:`redact` returns at
once; otherwise it costs a few substring searches per text.
"""

from __future__ import annotations

import base64
import re
import threading
import urllib.parse
from typing import Final

import orjson

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "forget_secrets",
    "has_secrets",
    "redact",
    "register_secret",
    "secret_prefix_length",
]

REDACTED: Final = "***"
"""What a secret (in any of its forms) is replaced with."""

MIN_SECRET_LENGTH: Final = 8
"""Shorter values are never registered: too many false hits in ordinary text."""

_CUT_AT_MOST: Final = 3
"""A secret is also found without up to this many leading characters."""
_SHORT_ESCAPES: Final = {"\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t"}
_UNESCAPE: Final = {v: k for k, v in _SHORT_ESCAPES.items()}
_ANY_ESCAPE: Final = re.compile(r"\\+(?:u([0-9a-fA-F]{4})|(.))", re.DOTALL)
_URLSAFE: Final = str.maketrans("+/", "-_")
_LOWER_HEX: Final = re.compile(r"%[0-9A-F]{2}")


class _Registry:
    """The registered secrets and what :func:`redact` searches for.

    ``needles`` is replaced as a whole (never mutated), last, so a reader on
    another thread sees either the old set or the new one.
    """

    __slots__ = ("escaped", "lock", "needles", "secrets", "shortest", "triggers")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.secrets: tuple[str, ...] = ()
        self.escaped: re.Pattern[str] | None = None
        self.triggers: tuple[str, ...] = ()  # what an escaped secret must contain
        self.shortest = 0  # no text shorter than this holds a secret in any form
        self.needles: tuple[str, ...] = ()


_REGISTRY: Final = _Registry()


def _base64_forms(secret: str) -> set[str]:
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
    return forms


def _url_forms(secret: str) -> set[str]:
    quoted = urllib.parse.quote(secret, safe="")
    plus = urllib.parse.quote_plus(secret, safe="")
    lower = (_LOWER_HEX.sub(lambda m: m.group().lower(), q) for q in (quoted, plus))
    return {quoted, plus, *lower}


def _cut(secret: str) -> int:
    """How many leading characters ``secret`` is also found without."""
    return max(0, min(_CUT_AT_MOST, len(secret) - MIN_SECRET_LENGTH))


def _needles(secret: str) -> set[str]:
    """Every literal form :func:`redact` replaces (the escaped ones also by pattern)."""
    escaped = orjson.dumps(secret).decode("utf-8")[1:-1]
    forms = {secret, escaped, escaped.replace("/", "\\/")}
    forms.update(secret[cut:] for cut in range(1, _cut(secret) + 1))
    forms |= _base64_forms(secret)
    forms |= _url_forms(secret)
    return {form for form in forms if form}


def _hex(digits: str) -> str:
    """A pattern for the hex ``digits``, each in either case."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in digits)


def _escaped_pattern(secret: str) -> str:
    """A pattern for ``secret`` with any of its characters JSON-escaped (at any
    depth) or URL-encoded."""
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
    return "".join(parts)


def _triggers(secrets: tuple[str, ...]) -> tuple[str, ...]:
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


def register_secret(value: str | None) -> bool:
    """Redact ``value`` from now on wherever :func:`redact` runs (the log, errors, output).

    Values shorter than :data:`MIN_SECRET_LENGTH` characters (and ``None``)
    are ignored; a value with surrounding whitespace is registered with and
    without it. Returns whether anything was registered.
    """
    if not isinstance(value, str):
        return False
    candidates = {v for v in (value, value.strip()) if len(v) >= MIN_SECRET_LENGTH}
    registry = _REGISTRY
    with registry.lock:
        new = candidates - set(registry.secrets)
        if not new:
            return bool(candidates)
        secrets = tuple(sorted({*registry.secrets, *new}, key=len, reverse=True))
        needles: set[str] = set()
        for secret in secrets:
            needles |= _needles(secret)
        pattern = "|".join(f"(?:{_escaped_pattern(s)})" for s in secrets)
        registry.secrets = secrets
        registry.escaped = re.compile(pattern)
        registry.triggers = _triggers(secrets)
        registry.shortest = min(len(n) for n in needles)
        # Longest first: a form that contains another is replaced whole.
        registry.needles = tuple(sorted(needles, key=len, reverse=True))
    return True


def forget_secrets() -> None:
    """Empty the registry (for tests; a running program has no reason to)."""
    registry = _REGISTRY
    with registry.lock:
        registry.needles = ()
        registry.escaped = None
        registry.triggers = ()
        registry.shortest = 0
        registry.secrets = ()


def has_secrets() -> bool:
    """Whether any secret is registered (else :func:`redact` changes nothing)."""
    return bool(_REGISTRY.needles)


def _unescape_loosely(text: str) -> tuple[str, ...]:
    """``text`` with every JSON escape undone, however deeply nested, and then
    URL-decoded with and without ``+`` for a space (a prefilter: whether the
    escaped pattern can match at all)."""

    def one(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return chr(int(match.group(1), 16))
        char = match.group(2)
        return _UNESCAPE.get(char, char)

    loose = _ANY_ESCAPE.sub(one, text) if "\\" in text else text
    if "\\u" in text:  # pair the surrogates that \uD83D\uDE00 escapes leave behind
        loose = loose.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if "%" not in loose:
        return (loose,)
    return urllib.parse.unquote(loose), urllib.parse.unquote_plus(loose)


def redact(text: str) -> str:
    """``text`` with every registered secret, in every form above, replaced by ``***``."""
    registry = _REGISTRY
    needles = registry.needles
    if not needles or len(text) < registry.shortest:
        return text
    for needle in needles:
        if needle in text:
            text = text.replace(needle, REDACTED)
    escaped = registry.escaped
    if escaped is not None and any(t in text for t in registry.triggers):
        candidates = _unescape_loosely(text)
        if any(secret in loose for loose in candidates for secret in registry.secrets):
            text = escaped.sub(REDACTED, text)
    return text


def secret_prefix_length(text: str) -> int:
    """How many characters at the end of ``text`` begin a registered secret.

    A streamed text may bring a secret in two pieces; a client holds back this
    many characters until the next piece shows whether the secret follows.
    A piece that ends with only the first one to three characters of a secret
    is not held back (0): the rest of the secret, which the next piece would
    then start with, is itself redacted (see :func:`redact`), so common
    endings ("s" before "sk-...") do not reshape the stream. 0 also when
    nothing is registered.
    """
    best = 0
    for secret in _REGISTRY.secrets:
        first = secret[0]
        shortest = _cut(secret) + 1
        i = text.find(first, max(0, len(text) - len(secret) + 1))
        while i != -1 and len(text) - i > best and len(text) - i >= shortest:
            if secret.startswith(text[i:]):
                best = len(text) - i
                break
            i = text.find(first, i + 1)
    return best
