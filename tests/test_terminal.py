"""Untrusted text reaches the terminal without its control sequences (issue 8, item 8).

Model output used to be printed raw by ``run``, ``chat`` and ``show``: an OSC 52
sequence in an answer set the clipboard, OSC 8 forged a link, CSI 2J cleared
the screen. Now every untrusted text (model and tool output, names, provider
errors) goes through ``safe_terminal_text`` before it is printed, while the log
keeps the bytes as they came.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tapelog.cli._terminal import safe_terminal_text
from tapelog.emulator import Emulator
from tapelog.store import JsonlStore

TAPELOG = str(Path(sys.executable).with_name("tapelog"))

CLIPBOARD = "\x1b]52;c;cm0=\x07"  # OSC 52: put "rm" on the clipboard
LINK = "\x1b]8;;http://e.x\x1b\\docs\x1b]8;;\x1b\\"  # OSC 8: "docs" links elsewhere
CLEAR = "\x1b[2J\x1b[H"  # CSI: clear the screen, cursor home
# every sequence and character a terminal acts on, and what must be left of them
# (short enough for the emulator's echo, which keeps 60 characters)
HOSTILE = f"A{CLIPBOARD}B{LINK}C{CLEAR}D\rE\u202eF"
assert len(HOSTILE) <= 60
SHOWN = "ABdocsCDEF"
ACTING = ("\x1b", "\x07", "\r", "\u202e", "\x9b", "\x9d")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text\n\twith tab", "plain text\n\twith tab"),
        (CLIPBOARD, ""),
        (LINK, "docs"),
        (CLEAR, ""),
        ("\x1b[38;5;196mred\x1b[0m", "red"),
        ("\x1bcreset", "reset"),  # ESC c: full terminal reset
        ("\x1b7save\x1b8", "save"),
        ("\x1b(0box\x1b(B", "box"),
        ("\x1bPq#0;2;0;0;0#0~~\x1b\\sixel", "sixel"),  # DCS
        ("\x1b_apc\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\end", "end"),
        ("\x9b2J\x9d52;c;aGk=\x9cok", "ok"),  # 8-bit CSI and OSC
        ("bell\x07 back\x08space del\x7f nul\x00", "bell backspace del nul"),
        ("over\rwrite", "overwrite"),
        ("\x85next line\x80", "next line"),  # C1 controls
        ("safe\u202eevil\u2066x\u2069", "safeevilx"),  # bidi override and isolates
        ("hebrew \u200f mark", "hebrew \u200f mark"),  # a mark reorders nothing
        ("unterminated \x1b]52;c;aGk=", "unterminated 52;c;aGk="),
        ("ünïcödé 日本 🙂", "ünïcödé 日本 🙂"),
    ],
)
def test_safe_terminal_text(text: str, shown: str) -> None:
    assert safe_terminal_text(text) == shown


def test_plain_text_is_returned_as_it_is() -> None:
    text = "nothing to strip here\n" * 100
    assert safe_terminal_text(text) is text


def _env(store: Path) -> dict[str, str]:
    env = {**os.environ, "TAPELOG_STORE": str(store)}
    env.pop("TAPELOG_PROVIDER", None)
    return env


def _tapelog(
    *args: str, env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TAPELOG, *args],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _assert_inert(output: str) -> None:
    for char in ACTING:
        assert char not in output, f"{char!r} reached the terminal"


def test_run_chat_and_show_print_model_text_without_control_sequences(tmp_path: Path) -> None:
    env = _env(tmp_path)
    # the offline emulator's default answer echoes the prompt: "ok: <prompt>"
    ran = _tapelog("run", HOSTILE, "--session", "t", "--tools", "none", env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == f"ok: {SHOWN}\n"
    _assert_inert(ran.stdout + ran.stderr)

    chatted = _tapelog("chat", "--session", "t", "--tools", "none", env=env, stdin=HOSTILE + "\n")
    assert chatted.returncode == 0, chatted.stderr
    assert f"ok: {SHOWN}" in chatted.stdout
    _assert_inert(chatted.stdout + chatted.stderr)

    shown = _tapelog("show", "t", "--chunks", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "ok: AB" in shown.stdout
    _assert_inert(shown.stdout + shown.stderr)

    # the log keeps the bytes as they came
    events = JsonlStore(tmp_path).load("t").session.events
    prompts = [e.data["content"][0]["text"] for e in events if e.type == "user/message"]
    answers = [e.data["content"][0]["text"] for e in events if e.type == "assistant/message"]
    assert prompts == [HOSTILE, HOSTILE]
    assert answers == [f"ok: {HOSTILE}"] * 2


def test_a_provider_error_is_printed_without_control_sequences(
    tmp_path: Path, loopback_emulator: tuple[Emulator, int]
) -> None:
    emulator, port = loopback_emulator
    message = f"overloaded {CLIPBOARD}{CLEAR}try later"
    emulator.push(
        {
            "error": {"status": 400, "message": message, "type": "invalid_request_error"},
            "in_stream": True,
        }
    )
    env = {**_env(tmp_path), "ANTHROPIC_API_KEY": "emulator-ignores-it"}
    failed = _tapelog(
        "run", "hi", "--tools", "none", "--provider", "anthropic",
        "--base-url", f"http://127.0.0.1:{port}/anthropic", env=env,
    )  # fmt: skip
    assert failed.returncode == 1, failed.stderr
    assert "invalid_request_error: overloaded try later" in failed.stderr
    _assert_inert(failed.stdout + failed.stderr)
