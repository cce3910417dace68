"""A tool's descriptions from its docstring, read by griffe's Google-style parser.

The summary (the first paragraph, lines joined with one space) describes the
tool; the ``Args:`` entries describe its parameters, each entry's lines joined
with one space. Both are model-visible request bytes, so the joining rules are
fixed here. griffe reports malformed entries through :mod:`logging`; it is
told not to, because a tool's docstring is not the user's terminal's business.
"""

from __future__ import annotations

import itertools
import re

__all__ = ["parse_docstring"]

_ARGS_HEADER_RE = re.compile(r"[ \t]*(?:Args|Arguments):[ \t]*")
_OTHER_PARAMS_HEADER_RE = re.compile(r"(?i:args|arguments|params|parameters):[ \t]*")
_LEAD = "."  # a first line griffe reads as plain text; never part of the output


def _griffe_input(doc: str) -> str:
    """``doc`` with the section headers griffe would read differently from how
    they have always been read here, so schema bytes stay what they were.

    The summary is the first lines up to a blank line or an "Args:" header, so
    griffe must not open a section on the first line: a line of :data:`_LEAD`
    goes above it (also keeping griffe from dedenting the lines below). griffe
    opens a section only after a blank line, but "Summary.\\nArgs:" has always
    described the parameters, so such a header gets its blank line. griffe also
    reads "Params:", "Parameters:" and any-case "args:" as the parameters
    section; only "Args:" and "Arguments:" ever described parameters here (and a
    mismatched entry is refused), so such a header becomes "Parameters:-",
    plain text in a paragraph nobody reads. Blank lines right under an "Args:"
    header go: griffe would skip the section.
    """
    out = [_LEAD]
    for line in doc.split("\n"):
        after_blank = not out[-1].strip()
        if _ARGS_HEADER_RE.fullmatch(line):
            if not after_blank:
                out.append("")
        elif _ARGS_HEADER_RE.fullmatch(out[-1]) and not line.strip():
            continue
        elif after_blank and _OTHER_PARAMS_HEADER_RE.fullmatch(line):
            line = line.replace(":", ":-", 1)
        out.append(line)
    return "\n".join(out)


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary and the parameter descriptions (by name) of a cleaned docstring."""
    import griffe  # ~30 ms; only a program that makes tools pays it, not every CLI start

    sections = griffe.Docstring(_griffe_input(doc)).parse(
        "google", warnings=False, warn_missing_types=False, warn_unknown_params=False
    )
    lead: str = sections[0].value  # the text section _LEAD starts
    summary = _joined("\n".join(itertools.takewhile(_in_summary, lead.splitlines()[1:])))
    # The first Args: section only, as always.
    params = next((s for s in sections if s.kind is griffe.DocstringSectionKind.parameters), None)
    args = {p.name.lstrip("*"): _joined(p.description) for p in (params.value if params else ())}
    return summary, args


def _in_summary(line: str) -> bool:
    """The summary ends at a blank line, or at an Args: header griffe left as text."""
    return bool(line.strip()) and not _ARGS_HEADER_RE.fullmatch(line)


def _joined(text: str) -> str:
    """Non-blank lines, stripped, joined with one space."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())
