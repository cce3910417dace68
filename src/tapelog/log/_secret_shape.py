"""Whether a value can be a secret at all, and whether it looks like one.

Registering a value redacts it from everything tapelog logs, so a value that
is no secret (``assistant``, ``production``) would blank ordinary words in
every log. Two tests decide:

* :func:`is_word`: a value that is one word (letters only, all lower case,
  all upper case or capitalised, at most :data:`LONGEST_WORD` letters) is
  never a secret, even when the user says it is (``Authorization: Bearer
  assistant``, ``PASSWORD=postgres``): redacting it would garble text and
  protect nothing.
* :func:`looks_like_secret`: for a value nobody named a secret (an MCP
  server's ``env`` entry such as ``AGENT_ROLE``): long, one piece, not a URL
  or a path, letters and digits mixed, and high in entropy, like a generated
  key or token.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Final

__all__ = [
    "GUESSED_MIN_LENGTH",
    "LONGEST_WORD",
    "MIN_ENTROPY_BITS",
    "is_word",
    "looks_like_secret",
    "names_a_secret",
]

LONGEST_WORD: Final = 20
"""Longer runs of letters are no dictionary word (a passphrase run together)."""

GUESSED_MIN_LENGTH: Final = 16
"""An unnamed value shorter than this is not taken for a secret."""

MIN_ENTROPY_BITS: Final = 3.0
"""An unnamed value needs this much Shannon entropy per character (a random
alphanumeric key has about 4 to 5.5; an English identifier about 3 or less)."""

_WORD: Final = re.compile(r"[a-z]+|[A-Z]+|[A-Z][a-z]+")
_SECRET_NAME: Final = re.compile(
    r"key|token|secret|passw|pwd|credential|private|signature|cookie"
    r"|authori[sz]ation|oauth|(?<![a-z])auth(?![a-z])",  # not GIT_AUTHOR_NAME
    re.IGNORECASE,
)


def is_word(value: str) -> bool:
    """Whether ``value`` is one word of letters (see the module docstring)."""
    return len(value) <= LONGEST_WORD and _WORD.fullmatch(value) is not None


def names_a_secret(name: str) -> bool:
    """Whether a variable, header or parameter ``name`` says its value is a
    secret (``GITHUB_TOKEN``, ``api_key``, ``Authorization``, ``DB_PASSWORD``)."""
    return _SECRET_NAME.search(name) is not None


def _entropy(value: str) -> float:
    counts = Counter(value)
    total = len(value)
    return -sum(c / total * math.log2(c / total) for c in counts.values())


def looks_like_secret(value: str) -> bool:
    """Whether a value nobody named a secret looks like a generated key or token."""
    if len(value) < GUESSED_MIN_LENGTH or is_word(value):
        return False
    if any(c.isspace() for c in value) or "://" in value or value[0] in "/~.":
        return False
    if not any(c.isdigit() for c in value) or not any(c.isalpha() for c in value):
        return False
    return _entropy(value) >= MIN_ENTROPY_BITS
