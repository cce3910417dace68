"""The example log in docs/format.md is a real log: it replays, re-encodes byte
for byte, and says what it claims about the surface and the header."""

from __future__ import annotations

from pathlib import Path

from tapelog.log import decode
from tapelog.log._api import Session, fold_request_header

DOC = Path(__file__).resolve().parents[2] / "docs" / "format.md"


def _example_lines() -> list[bytes]:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("## Example", 1)[1].split("```", 2)[1]
    return [line.encode() for line in block.strip().splitlines()]


def test_the_documented_example_is_a_valid_log() -> None:
    header, *lines = _example_lines()
    info = decode(header)
    assert list(info) == ["format_version", "id", "created", "cwd"]
    assert info["format_version"] == 0
    session = Session.from_events([decode(line) for line in lines], id=info["id"])
    assert [e.encode() for e in session.events] == lines
    assert session.surface == [1, 8, 18, 15]
    assert session.replace_generation == 1
    at_step_1 = Session.from_events(session.events[:12])
    assert at_step_1.surface == [1, 8, 10]
    folded = fold_request_header(session.events[:14])
    assert folded is not None
    assert folded.system == "You are a coding agent.\nWork in /home/me/proj.\nBe brief."
    assert session.derive_messages()[2]["content"][0]["content"] == "[trimmed]"
