"""Untrusted text made safe to print on a terminal.

Model output, tool output, names and provider error messages are data, not
terminal commands: printed raw, an escape sequence in them could clear the
screen, retitle the window, set the clipboard (OSC 52), forge a link whose
target differs from its text (OSC 8), or move the cursor to overwrite what
was printed before. :func:`safe_terminal_text` removes all of that before
text reaches a terminal; the log keeps the bytes as they were.

Removed:

* escape sequences whole: CSI (``ESC [`` ... final byte), OSC (``ESC ]`` ...
  ``BEL`` or ``ESC \\``), DCS, SOS, PM and APC strings (``ESC P`` / ``X`` /
  ``^`` / ``_`` ... ``ESC \\``), their 8-bit forms (``U+009B``, ``U+009D``,
  ``U+0090``, ...), and the two- and three-byte escapes (``ESC c`` resets the
  terminal, ``ESC 7`` / ``ESC 8`` move the cursor, ``ESC ( 0`` switches the
  character set). A string sequence that is never terminated loses only its
  introducer: the rest stays visible as plain text;
* every other C0 control character except newline and tab (carriage return
  and backspace included: they let a text overwrite what it printed), DEL,
  and the C1 controls ``U+0080``-``U+009F``;
* the bidirectional embedding, override and isolate characters ``U+202A``-
  ``U+202E`` and ``U+2066``-``U+2069``, which reorder how a line reads
  ("Trojan Source", CVE-2021-42574). The marks ``U+200E`` / ``U+200F`` stay:
  they reorder nothing by themselves and right-to-left text uses them.

:func:`terminal_text` also redacts the registered secrets
(:func:`tapelog.log.redact`), for text that did not come from the log.
"""

from __future__ import annotations

import re
from typing import Final

from tapelog.log import redact

__all__ = ["safe_terminal_text", "terminal_text"]

_SEQUENCE: Final = re.compile(
    r"""
    (?: \x1b\[ | \x9b ) [0-?]* [ -/]* [@-~]                      # CSI
  | (?: \x1b\] | \x9d ) [^\x07\x1b\x9c]* (?: \x07 | \x1b\\ | \x9c )  # OSC, ends with BEL or ST
  | (?: \x1b[PX^_] | [\x90\x98\x9e\x9f] ) [^\x1b\x9c]* (?: \x1b\\ | \x9c )  # DCS SOS PM APC
  | \x1b [ -/]* [0-~]                                         # two- and three-byte escapes
    """,
    re.VERBOSE,
)
_CONTROL: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def safe_terminal_text(text: str) -> str:
    """``text`` without escape sequences, control characters (but newline and
    tab) or bidirectional overrides; see the module docstring."""
    if _CONTROL.search(text) is None:  # the common case: one scan, no copy
        return text
    return _CONTROL.sub("", _SEQUENCE.sub("", text))


def terminal_text(text: str) -> str:
    """:func:`safe_terminal_text` of ``text`` with every registered secret redacted."""
    return safe_terminal_text(redact(text))
