"""A tool's descriptions from its docstring, read by griffe's Google-style parser.

The summary (the first paragraph, lines joined with one space) describes the
tool; the ``Args:`` entries describe its parameters, each entry's lines joined
with one space. Both are model-visible request bytes, so the joining rules are
fixed here. griffe reports malformed entries through :mod:`logging`; it is
told not to, because a tool's docstring is not the user's terminal's business.
"""

from __future__ import annotations

import re

import griffe

__all__ = ["parse_docstring"]

# griffe only opens a section after a blank line; "Summary.\nArgs:" has always
# described the parameters here, so such a header gets its blank line first.
_ARGS_HEADER_RE = re.compile(r"^(?=[ \t]*(?:Args|Arguments):[ \t]*$)", re.MULTILINE)


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary and the parameter descriptions (by name) of a cleaned docstring."""
    sections = griffe.Docstring(_ARGS_HEADER_RE.sub("\n", doc)).parse(
        "google", warnings=False, warn_missing_types=False, warn_unknown_params=False
    )
    summary = ""
    if sections and sections[0].kind is griffe.DocstringSectionKind.text:
        text: str = sections[0].value
        summary = _joined(text.split("\n\n", 1)[0])
    args: dict[str, str] = {}
    for section in sections:
        if section.kind is griffe.DocstringSectionKind.parameters:
            for param in section.value:
                args[param.name.lstrip("*")] = _joined(param.description)
    return summary, args


def _joined(text: str) -> str:
    """Non-blank lines, stripped, joined with one space."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())
