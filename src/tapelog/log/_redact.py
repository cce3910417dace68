"""Known secrets, and their redaction from every text that can be logged or shown.

Whoever reads a secret registers it (:func:`register_secret`): the LLM clients
when they read an API key from the environment, the PostgreSQL store when its
connection string holds a password. From then on :func:`redact` replaces the
secret with :data:`REDACTED` wherever it appears, in any of the forms a
provider, a tool or a model may echo it in (``_secret_forms``):

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
* without its first one to three characters (as long as eight remain), in
  any of the forms above: what the second piece of a streamed text holds when
  a secret is split right after its first characters (see
  :func:`secret_prefix_length`).

The log's one choke point is :func:`tapelog.log.freeze`: every content string
of every logged event goes through it (``Session.append`` freezes what it is
given), so a registered secret never enters the log, and requests, which are
rebuilt from the log, carry the redacted text too.

Only values that can be secrets are registered: eight or more characters,
and never one word of letters (``_secret_shape``), which occurs by chance in
ordinary text. The process-wide registry only grows (:func:`forget_secrets`
empties it, for tests). :func:`secret_scope` adds secrets for the current
context only (a proxy request's own credentials): they are redacted while
that request is handled and never from another's. With no secret known
:func:`redact` returns at once; otherwise it costs a few substring searches
per text.
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import re
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Final

from tapelog.log._secret_forms import (
    MIN_SECRET_LENGTH,
    base64_forms,
    cut,
    decode_prefix,
    escaped_pattern,
    literal_forms,
    triggers,
    unescape_loosely,
)
from tapelog.log._secret_shape import is_word

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "can_be_secret",
    "forget_secrets",
    "has_secrets",
    "redact",
    "redaction_stamp",
    "register_secret",
    "scoped_secrets",
    "secret_prefix_length",
    "secret_scope",
]

REDACTED: Final = "***"
"""What a secret (in any of its forms) is replaced with."""


def can_be_secret(value: str) -> bool:
    """Whether ``value`` may be registered: eight or more characters, not one word."""
    return len(value) >= MIN_SECRET_LENGTH and not is_word(value)


class _SecretSet:
    """A set of secrets compiled for :func:`redact` and :func:`secret_prefix_length`
    (immutable: a new set replaces the old one as a whole)."""

    __slots__ = (
        "decoded_starts",
        "escaped",
        "literal_starts",
        "longest",
        "needles",
        "plain_window",
        "secrets",
        "serial",
        "shortest",
        "starts",
        "targets",
        "triggers",
        "window",
    )

    def __init__(self, secrets: Iterable[str]) -> None:
        self.serial = next(_SERIALS)  # tells this set from every other (see redaction_stamp)
        self.secrets = tuple(sorted(set(secrets), key=len, reverse=True))
        needles: set[str] = set()
        for secret in self.secrets:
            needles |= literal_forms(secret)
        # Longest first: a form that contains another is replaced whole.
        self.needles = tuple(sorted(needles, key=len, reverse=True))
        self.shortest = min((len(n) for n in needles), default=0)
        pattern = "|".join(f"(?:{escaped_pattern(s)})" for s in self.secrets)
        self.escaped = re.compile(pattern) if pattern else None
        self.targets = tuple(s[cut(s) :] for s in self.secrets)  # in every loose form
        self.triggers = triggers(self.secrets)
        # What the end of a streamed text may begin: base64 forms matched literally ...
        self.literal_starts: dict[str, list[tuple[str, int]]] = {}
        for secret in self.secrets:
            for form in sorted(base64_forms(secret)):
                self.literal_starts.setdefault(form[0], []).append((form, cut(form) + 1))
        # ... the rest decoded (raw, JSON- and URL-escaped), starting at one of these.
        self.decoded_starts = frozenset({s[0] for s in self.secrets} | {"\\", "%"})
        self.starts = _starts(self.secrets, self.literal_starts) if self.secrets else None
        self.longest = max((len(s) for s in self.secrets), default=0)
        self.window = 12 * self.longest + 8  # an escaped character is 6 or more characters
        self.plain_window = 4 * self.longest // 3 + 4  # base64 is the longest unescaped form

    def redact(self, text: str) -> str:
        if len(text) < self.shortest:
            return text
        # The escaped forms first: a literal form inside one (the raw rest of a
        # secret whose first characters are escaped) would otherwise leave them.
        escaped = self.escaped
        if escaped is not None and any(t in text for t in self.triggers):
            candidates = unescape_loosely(text)
            if any(target in loose for loose in candidates for target in self.targets):
                text = escaped.sub(REDACTED, text)
        for needle in self.needles:
            if needle in text:
                text = text.replace(needle, REDACTED)
        return text

    def prefix_length(self, text: str, at_least: int) -> int:
        """The longest end of ``text`` (longer than ``at_least``) that begins a
        form of a secret and is long enough to hold back (see
        :func:`secret_prefix_length`); 0 if none."""
        if self.starts is None:
            return 0
        first = max(0, len(text) - self.window)
        if "\\" not in text[first:] and "%" not in text[first:]:
            first = max(0, len(text) - self.plain_window)  # no escape: as it is or base64
        for match in self.starts.finditer(text, first):
            i = match.start()
            size = len(text) - i
            if size <= at_least:
                return 0
            if text[i] == "\\" and i > 0 and text[i - 1] == "\\":
                continue  # inside a run of backslashes: its start was tried
            if self._begins_a_form(text[i:]):
                return size
        return 0

    def _begins_a_form(self, tail: str) -> bool:
        for form, enough in self.literal_starts.get(tail[0], ()):
            if enough <= len(tail) < len(form) and form.startswith(tail):
                return True
        if tail[0] not in self.decoded_starts:
            return False
        decoded = decode_prefix(tail, self.secrets)
        if decoded is None:
            return False
        text, open_escape = decoded
        return any(
            len(tail) > cut(secret)
            and secret.startswith(text)
            and (open_escape or len(text) < len(secret))
            for secret in self.secrets
        )


def _starts(secrets: tuple[str, ...], literal: dict[str, list[tuple[str, int]]]) -> re.Pattern[str]:
    """Where in a text a form of ``secrets`` may start: a secret's first two
    characters (the second may be escaped or still to come), an escape that
    may encode a first character, a base64 form's first two characters. Most
    text has few such places, so few are looked at in Python."""
    firsts = "".join(sorted({s[0] for s in secrets}))
    ways = {re.escape(s[0]) + f"(?:{re.escape(s[1])}|\\\\|%|\\Z)" for s in secrets if len(s) > 1}
    ways.add(f"\\\\+(?:u|[{re.escape(firsts)}]|\\Z)")
    ways.add("%(?:[0-9a-fA-F]|\\Z)")
    for forms in literal.values():
        ways.update(re.escape(f[:2]) + "|" + re.escape(f[0]) + "\\Z" for f, _ in forms)
    return re.compile("(?=" + "|".join(sorted(ways)) + ")")


_SERIALS: Final = itertools.count()
_EMPTY: Final = _SecretSet(())


class _Registry:
    """The process-wide secrets (``current``, replaced as a whole, never mutated,
    so a reader on another thread sees either the old set or the new one) and
    whether any secret is known anywhere (``live``: freeze's one test)."""

    __slots__ = ("current", "live", "lock", "scopes")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.current = _EMPTY
        self.scopes = 0  # how many secret_scope blocks are open, in any context
        self.live = False

    def update(self) -> None:
        self.live = bool(self.current.secrets) or self.scopes > 0


_REGISTRY: Final = _Registry()
_SCOPED: Final[contextvars.ContextVar[_SecretSet]] = contextvars.ContextVar(
    "tapelog_scoped_secrets", default=_EMPTY
)


def _candidates(value: str | None) -> set[str]:
    if not isinstance(value, str):
        return set()
    return {v for v in (value, value.strip()) if can_be_secret(v)}


def register_secret(value: str | None) -> bool:
    """Redact ``value`` from now on wherever :func:`redact` runs (the log, errors, output).

    Values that cannot be secrets (:func:`can_be_secret`: shorter than
    :data:`MIN_SECRET_LENGTH` characters, or one word) and ``None`` are
    ignored; a value with surrounding whitespace is registered with and
    without it. Returns whether anything was registered.
    """
    candidates = _candidates(value)
    registry = _REGISTRY
    with registry.lock:
        known = set(registry.current.secrets)
        if candidates - known:
            registry.current = _SecretSet(known | candidates)
            registry.update()
    return bool(candidates)


@functools.lru_cache(maxsize=256)
def _compiled(secrets: frozenset[str]) -> _SecretSet:
    """The set of ``secrets``, compiled once (a proxy client sends its key with
    every request; compiling its patterns takes milliseconds)."""
    return _SecretSet(secrets)


@contextmanager
def secret_scope(values: Iterable[str]) -> Iterator[None]:
    """Redact ``values`` (those that can be secrets) too, in this context only.

    For secrets that belong to one task: a proxy client's key is redacted from
    what that client's request logs, never from another client's session.
    Tasks started inside the block inherit the scope. Nests: an inner scope
    adds to the outer one.
    """
    new = {c for v in values for c in _candidates(v)}
    outer = _SCOPED.get()
    if not new - set(outer.secrets):
        yield
        return
    token = _SCOPED.set(_compiled(frozenset({*outer.secrets, *new})))
    with _REGISTRY.lock:
        _REGISTRY.scopes += 1
        _REGISTRY.update()
    try:
        yield
    finally:
        _SCOPED.reset(token)
        with _REGISTRY.lock:
            _REGISTRY.scopes -= 1
            _REGISTRY.update()


def scoped_secrets() -> tuple[str, ...]:
    """The secrets :func:`secret_scope` added in this context (to enter the
    same scope again in another task)."""
    return _SCOPED.get().secrets


def redaction_stamp() -> int:
    """A number that names the secrets in force here; it changes whenever they do.

    What was redacted under one stamp needs no redacting again while the
    stamp is the same (freeze marks the containers it makes with it). The
    process-wide set's serial alone outside any scope; inside one, the scoped
    set's serial too, so a value redacted outside a scope (or in another
    scope) is redacted again within it.
    """
    registry = _REGISTRY
    current = registry.current.serial
    if not registry.scopes:
        return current
    scoped = _SCOPED.get()
    return current if scoped is _EMPTY else current | (scoped.serial << 32)


def forget_secrets() -> None:
    """Empty the process-wide registry (for tests; a running program has no reason to)."""
    registry = _REGISTRY
    with registry.lock:
        registry.current = _EMPTY
        registry.update()


def _sets() -> tuple[_SecretSet, ...]:
    """The secret sets in force here: the process-wide one, and this context's."""
    registry = _REGISTRY
    if not registry.scopes:
        return (registry.current,)
    return (registry.current, _SCOPED.get())


def has_secrets() -> bool:
    """Whether any secret is known here (else :func:`redact` changes nothing)."""
    return _REGISTRY.live and any(s.secrets for s in _sets())


def redact(text: str) -> str:
    """``text`` with every known secret, in every form above, replaced by ``***``."""
    if not _REGISTRY.live:
        return text
    for secrets in _sets():
        if secrets.secrets:
            text = secrets.redact(text)
    return text


def secret_prefix_length(text: str) -> int:
    """How many characters at the end of ``text`` begin a known secret, in any form.

    A streamed text may bring a secret in two pieces; a client holds back this
    many characters until the next piece shows whether the secret follows.
    The end is held back when it begins the secret as it is, escaped (JSON or
    URL; an escape cut in the middle, ``\\u00``, counts) or in base64. An end
    of only one to three characters is not held back (0): the rest of the
    secret, which the next piece would then start with, is itself redacted
    (see :func:`redact`), so common endings ("s" before "sk-...") do not
    reshape the stream. 0 also when nothing is known.
    """
    best = 0
    if not _REGISTRY.live:
        return 0
    for secrets in _sets():
        best = max(best, secrets.prefix_length(text, best))
    return best
