"""``tapelog run`` and ``chat`` print the answer as it streams, and stay clean when piped.

On a pseudo-terminal the answer's text shows while the provider is still
streaming it (the emulator's network edge holds the stream half-way), each
tool call gets a note, and model text is cleaned piece by piece exactly as it
is cleaned whole. Through a pipe, stdout is the final answer and nothing else:
the logged text of the turn's last assistant message.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _edge import Gate
from tapelog.cli._stream_out import LiveText
from tapelog.cli._terminal import terminal_text
from tapelog.emulator import Emulator
from test_cli_chat import TAPELOG, Terminal, _env, _events, _texts
from test_terminal import ACTING, CLEAR, CLIPBOARD, HOSTILE, LINK, SHOWN

needs_pty = pytest.mark.skipif(sys.platform != "linux", reason="needs a pseudo-terminal")

# --- cleaning text piece by piece ---------------------------------------------

SAMPLES = [
    HOSTILE,
    f"red \x1b[38;5;196malert\x1b[0m{CLIPBOARD} and {LINK} then {CLEAR}end",
    "\x1bPq#0;2;0;0;0#0~~\x1b\\sixel \x9b2J\x9d52;c;aGk=\x9cok",
    "unterminated \x1b]52;c;aGk= stays visible",
    "\x1b]abc\x1bXnot an ST\x1b",
    "lone escape at the end \x1b",
    "\x1b7save\x1b8 \x1bcreset \x1b(0box\x1b(B over\rwrite \u202eevil",
]


def _live(pieces: list[str]) -> list[str]:
    live = LiveText()
    return [*(live.feed(piece) for piece in pieces), live.end()]


@pytest.mark.parametrize("text", SAMPLES)
def test_every_split_shows_what_the_whole_text_shows(text: str) -> None:
    whole = terminal_text(text)
    for i, j in itertools.combinations(range(len(text) + 1), 2):
        shown = _live([text[:i], text[i:j], text[j:]])
        assert "".join(shown) == whole, (i, j)
        for piece in shown:
            assert all(char not in piece for char in ACTING)


@given(
    st.lists(st.text(alphabet=st.sampled_from(list("ab[]\\;07P_^X \x1b\x07\x9b\x9c\x9d\x90\r"))))
)
def test_random_pieces_show_what_the_whole_text_shows(pieces: list[str]) -> None:
    shown = _live(pieces)
    assert "".join(shown) == terminal_text("".join(pieces))
    for piece in shown:
        assert all(char not in piece for char in ACTING)


# --- on a terminal ------------------------------------------------------------

STORY = "Part one of the answer, streamed first. " + "Then the rest of it arrives. " * 30


@needs_pty
def test_run_on_a_terminal_prints_the_answer_while_it_streams(
    tmp_path: Path, loopback_emulator: tuple[Emulator, int]
) -> None:
    emulator, port = loopback_emulator
    emulator.push({"text": STORY})
    gate = Gate(marker=b"Part one")
    emulator.app.add_middleware(gate.wrap)
    argv = [TAPELOG, "run", "Tell me.", "--session", "live", "--tools", "none"]
    argv += ["--provider", "emulator", "--base-url", f"http://127.0.0.1:{port}/v1"]
    term = Terminal(argv, _env(tmp_path))
    try:
        assert gate.holding.wait(timeout=30), term.text()
        # the stream is held after its first piece: that piece is on the screen already
        term.wait_for("Part one of the a")
        assert "[completed]" not in term.text()
        gate.release.set()
        term.wait_for("[completed] turn 1")
        assert term.proc.wait(timeout=30) == 0, term.text()
    finally:
        gate.release.set()
        term.close()
    shown = term.text()
    assert shown.count(STORY) == 1  # streamed, not printed again at the end
    assert shown.index(STORY + "\n") < shown.index("[completed] turn 1")
    assert _texts(_events(tmp_path, "live"), "assistant/message") == [STORY]


@needs_pty
def test_model_text_split_across_deltas_reaches_the_terminal_cleaned(tmp_path: Path) -> None:
    # The offline emulator echoes the prompt in 24-character deltas, so the
    # escape sequences of HOSTILE arrive cut in pieces.
    argv = [TAPELOG, "run", HOSTILE, "--session", "hostile", "--tools", "none"]
    term = Terminal(argv, _env(tmp_path))
    try:
        term.wait_for("[completed] turn 1")
        assert term.proc.wait(timeout=30) == 0, term.text()
    finally:
        term.close()
    shown = term.text()
    assert f"ok: {SHOWN}\n" in shown
    for char in ACTING:
        assert char not in shown, f"{char!r} reached the terminal"
    chunks = [
        e.data["chunk"]["text"]
        for e in _events(tmp_path, "hostile")
        if e.type == "assistant/chunk" and e.data["chunk"]["kind"] == "text"
    ]
    assert len(chunks) > 1
    assert any(CLIPBOARD not in chunk and "\x1b]52" in chunk for chunk in chunks) or any(
        LINK not in chunk and "\x1b]8" in chunk for chunk in chunks
    ), "the test needs a sequence cut across deltas"


def _tool_script(emulator: Emulator) -> None:
    emulator.push(
        {
            "text": "Let me look at the workspace first.",
            "tool_calls": [{"name": "list_dir", "arguments": '{"path": "."}'}],
        },
        {"text": "The workspace holds notes.txt, and nothing else."},
    )


@needs_pty
def test_a_terminal_sees_every_step_and_a_note_per_tool_call(
    tmp_path: Path, loopback_emulator: tuple[Emulator, int]
) -> None:
    emulator, port = loopback_emulator
    _tool_script(emulator)
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("hello\n")
    argv = [TAPELOG, "run", "What is here?", "--session", "steps", "--workspace", str(workspace)]
    argv += ["--provider", "emulator", "--base-url", f"http://127.0.0.1:{port}/v1"]
    term = Terminal(argv, _env(tmp_path / "store"))
    try:
        term.wait_for("[completed] turn 1")
        assert term.proc.wait(timeout=30) == 0, term.text()
    finally:
        term.close()
    shown = term.text()
    first = shown.index("Let me look at the workspace first.\n")
    note = shown.index('[tool] list_dir {"path": "."}\n')
    answer = shown.index("The workspace holds notes.txt, and nothing else.\n")
    assert first < note < answer < shown.index("[completed] turn 1")
    assert shown.count("The workspace holds notes.txt") == 1


@needs_pty
def test_piped_stdout_is_exactly_the_final_answer(
    tmp_path: Path, loopback_emulator: tuple[Emulator, int]
) -> None:
    emulator, port = loopback_emulator
    _tool_script(emulator)
    workspace = tmp_path / "work"
    workspace.mkdir()
    argv = [TAPELOG, "run", "What is here?", "--session", "piped", "--workspace", str(workspace)]
    argv += ["--provider", "emulator", "--base-url", f"http://127.0.0.1:{port}/v1"]
    done = subprocess.run(
        argv, env=_env(tmp_path / "store"), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    answers = _texts(_events(tmp_path / "store", "piped"), "assistant/message")
    assert answers == ["Let me look at the workspace first.", done.stdout.removesuffix("\n")]
    assert done.stdout == "The workspace holds notes.txt, and nothing else.\n"
    assert "[tool]" not in done.stderr
    assert "[completed] turn 1" in done.stderr


@needs_pty
def test_chat_on_a_terminal_streams_each_answer(tmp_path: Path) -> None:
    argv = [TAPELOG, "chat", "--session", "chat-live", "--tools", "none"]
    term = Terminal(argv, _env(tmp_path))
    try:
        seen = term.wait_for("you> ")
        term.type(b"first question\r")
        seen = term.wait_for("ok: first question\n", after=seen)
        seen = term.wait_for("[completed] turn 1", after=seen)
        seen = term.wait_for("you> ", after=seen)
        term.type(b"second one\r")
        seen = term.wait_for("ok: second one\n", after=seen)
        term.wait_for("[completed] turn 2", after=seen)
        term.wait_for("you> ", after=seen)
        term.type(b"\x04")
        assert term.proc.wait(timeout=30) == 0, term.text()
    finally:
        term.close()
    shown = term.text()
    assert shown.count("ok: first question") == 1
    assert "Traceback" not in shown
