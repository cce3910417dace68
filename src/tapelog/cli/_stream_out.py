"""Printing a turn's answer as it streams, safely (``tapelog run`` and ``chat``).

The commands read the turn through :meth:`Agent.stream`, so what they print is
what the log says. On a terminal the text deltas are printed as they arrive,
every step's, and a one-line note for each tool call and each failed attempt
goes to stderr; reasoning is logged, not printed. When stdout is not a
terminal nothing is printed live: the command prints the final answer once
the turn has ended, exactly as before streaming existed, so a pipe gets the
answer and nothing else.

Model text is hostile. :class:`LiveText` cleans it as
:func:`~tapelog.cli._terminal.terminal_text` does, but piece by piece: an
escape sequence split across two deltas is held back until it is complete
(or provably not a sequence), so the terminal shows exactly what
``terminal_text`` of the whole answer shows, and no piece ever carries a
control character.
"""

from __future__ import annotations

import contextlib
import re
import sys
from typing import Final

import click

from tapelog.agent import (
    Agent,
    AttemptFailed,
    MessageEvent,
    StepEnd,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    TurnEnd,
    TurnResult,
)
from tapelog.cli._terminal import _CONTROL, _SEQUENCE, terminal_text
from tapelog.log import redact

__all__ = ["LiveText", "stdout_is_terminal", "stream_answer"]

_INTRODUCER: Final = re.compile("[\x1b\x90\x98\x9b\x9d\x9e\x9f]")
"""Where a sequence :data:`_SEQUENCE` removes can start."""

_OPEN: Final = re.compile(
    r"""
    (?: \x1b\[ | \x9b ) [0-?]* [ -/]* \Z                                 # CSI, no final byte yet
  | (?: \x1b\] | \x9d ) [^\x07\x1b\x9c]* \x1b? \Z                        # OSC, not terminated yet
  | (?: \x1b[PX^_] | [\x90\x98\x9e\x9f] ) [^\x1b\x9c]* \x1b? \Z          # DCS SOS PM APC, ditto
  | \x1b [ -/]* \Z                                                       # an escape, incomplete
    """,
    re.VERBOSE,
)
"""A sequence that the text so far neither completes nor rules out."""

_HOLD_LIMIT: Final = 4096
"""Longest open sequence held back; past it, it is decided as if the text ended."""

_NOTE_LIMIT: Final = 120


class LiveText:
    """Incremental :func:`terminal_text`: ``feed`` the pieces, ``end`` at the end.

    The joined output equals ``terminal_text`` of the joined pieces (unless a
    sequence stays open for more than :data:`_HOLD_LIMIT` characters, when it
    is treated as unterminated early: still no control character passes).
    """

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        text = self._held + redact(piece)
        self._held = ""
        out: list[str] = []
        pos = 0
        while (found := _INTRODUCER.search(text, pos)) is not None:
            start = found.start()
            out.append(text[pos:start])
            if _OPEN.match(text, start) and len(text) - start <= _HOLD_LIMIT:
                self._held = text[start:]
                return _CONTROL.sub("", "".join(out))
            sequence = _SEQUENCE.match(text, start)
            # No sequence: the introducer alone is a control character, removed below.
            pos = sequence.end() if sequence is not None else start + 1
        out.append(text[pos:])
        return _CONTROL.sub("", "".join(out))

    def end(self) -> str:
        """What was held back, decided as the end of the text."""
        held, self._held = self._held, ""
        return terminal_text(held) if held else ""


def _short(text: str) -> str:
    text = " ".join(terminal_text(text).split())
    return text if len(text) <= _NOTE_LIMIT else text[: _NOTE_LIMIT - 1] + "…"


class _LiveOutput:
    """Prints a turn's events on a terminal as they arrive."""

    def __init__(self) -> None:
        self._text = LiveText()
        self._mid_line = False  # stdout's cursor is not at the start of a line
        self._broken = False  # stdout failed (a closed terminal): stop printing

    def _out(self, text: str) -> None:
        if not text or self._broken:
            return
        try:
            click.echo(text, nl=False)  # flushes: each delta shows at once
        except OSError:
            self._broken = True
            return
        self._mid_line = not text.endswith("\n")

    def _note(self, text: str) -> None:
        self.end_line()
        with contextlib.suppress(OSError):
            click.echo(text, err=True)

    def end_line(self) -> None:
        """Print what is held back, then end the line if text left it open."""
        self._out(self._text.end())
        if self._mid_line:
            self._out("\n")

    def show(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self._out(self._text.feed(event.text))
        elif isinstance(event, MessageEvent | StepEnd):
            self._out(self._text.end())
        elif isinstance(event, ToolCallEvent):
            self._note(f"[tool] {_short(event.name + ' ' + event.arguments)}")
        elif isinstance(event, AttemptFailed):
            then = "retrying" if event.retry_in_ms is not None else "the step ends"
            self._note(f"[attempt {event.attempt} failed, {then}] {_short(event.message)}")


def stdout_is_terminal() -> bool:
    """Whether stdout is a terminal (then the answer is printed as it streams)."""
    stream = sys.stdout
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):  # closed or detached
        return False


async def stream_answer(agent: Agent, prompt: str, *, live: bool) -> TurnResult:
    """Run one turn through ``agent.stream``; with ``live``, print it as it streams.

    Returns the turn's result; whatever stops the reading (an exception, a
    cancellation) closes the stream, which aborts the turn and logs its end.
    """
    output = _LiveOutput() if live else None
    result: TurnResult | None = None
    try:
        async with contextlib.aclosing(agent.stream(prompt)) as events:
            async for event in events:
                if isinstance(event, TurnEnd):
                    result = event.result
                elif output is not None:
                    output.show(event)
    finally:
        if output is not None:
            output.end_line()
    if result is None:  # cannot happen: a stream without its TurnEnd raises
        raise RuntimeError("the turn's stream ended without its turn end")
    return result
