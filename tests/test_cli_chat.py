"""``tapelog chat`` driven the way a person drives it.

First through a pipe: two prompts (one continued over two lines with a
trailing backslash), then end of input. Then on a pseudo-terminal that is the
chat's controlling terminal, so typing Ctrl-C sends SIGINT exactly as a
keyboard would: the first turn is held in flight by a gate at the emulator's
network edge (it streams a first piece of text and then waits), Ctrl-C aborts
it, and the chat answers the next prompt and exits on Ctrl-D.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from _edge import Gate
from tapelog.emulator import Emulator
from tapelog.log._api import Event
from tapelog.store import JsonlStore

TAPELOG = str(Path(sys.executable).with_name("tapelog"))


def _env(store: Path) -> dict[str, str]:
    env = {**os.environ, "TAPELOG_STORE": str(store)}
    env.pop("TAPELOG_PROVIDER", None)
    return env


def _piped_chat(
    session_id: str, stdin: str, env: dict[str, str], *extra: str
) -> subprocess.CompletedProcess[str]:
    """``tapelog chat`` with its input piped (no terminal), as a script would run it."""
    return subprocess.run(
        [TAPELOG, "chat", "--session", session_id, "--tools", "none", *extra],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _events(store: Path, session_id: str) -> list[Event]:
    return list(JsonlStore(store).load(session_id).session.events)


def _texts(events: list[Event], etype: str) -> list[str]:
    return [
        "".join(b["text"] for b in e.data["content"] if b["type"] == "text")
        for e in events
        if e.type == etype
    ]


def test_piped_prompts_with_a_continuation_line_then_eof(tmp_path: Path) -> None:
    stdin = "What is a prefix cache?\nTell me about\\\nthe log, please.\n"
    done = _piped_chat("chat-1", stdin, _env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "using the offline emulator" in done.stderr
    # the emulator's default policy echoes the prompt: each answer names its prompt
    assert "ok: What is a prefix cache?" in done.stdout
    assert "ok: Tell me about\nthe log, please." in done.stdout
    assert "[completed] turn 1" in done.stderr
    assert "[completed] turn 2" in done.stderr
    assert "Traceback" not in done.stderr

    events = _events(tmp_path, "chat-1")
    assert _texts(events, "user/message") == [
        "What is a prefix cache?",
        "Tell me about\nthe log, please.",
    ]
    ends = [e.data for e in events if e.type == "turn/end"]
    assert [(d["turn"], d["reason"]["kind"]) for d in ends] == [(1, "completed"), (2, "completed")]
    # the turn end was flushed, and the write closed by its digest
    assert [e.type for e in events[-2:]] == ["turn/end", "log/digest"]


def test_a_failed_turn_says_why_and_the_chat_goes_on(tmp_path: Path) -> None:
    env = _env(tmp_path)
    env.pop("DEEPSEEK_API_KEY", None)
    done = _piped_chat("nokey", "hello\nstill there?\n", env, "--provider", "deepseek")
    assert done.returncode == 0, done.stderr
    why = (
        "error: The deepseek provider needs an API key: set DEEPSEEK_API_KEY in the environment "
        "(keys are read from the environment only and never logged)."
    )
    assert done.stderr.count(why) == 2
    assert "[error] turn 2" in done.stderr
    ends = [e.data["reason"] for e in _events(tmp_path, "nokey") if e.type == "turn/end"]
    assert [r["kind"] for r in ends] == ["error", "error"]


# --- Ctrl-C on a real terminal ------------------------------------------------


def _unread(port: int) -> int | None:
    """Bytes waiting in the client socket connected to 127.0.0.1:``port`` (None: none)."""
    remote = f"0100007F:{port:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[2] == remote and fields[3] == "01":  # ESTABLISHED, client side
            return int(fields[4].split(":")[1], 16)
    return None


def _waiting(pid: int) -> bool:
    """The process's main thread sleeps in epoll (its asyncio loop has nothing to do)."""
    wchan = Path(f"/proc/{pid}/task/{pid}/wchan").read_text()
    return "epoll" in wchan or wchan == "0"  # "0": the kernel does not say


class Terminal:
    """A pseudo-terminal whose slave side is the child's controlling terminal."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        import pty

        self.master, slave = pty.openpty()
        # The child becomes a session leader and takes the pty as its controlling
        # terminal (TIOCSCTTY), so ^C typed on it is SIGINT to the chat process.
        take_tty = (
            "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
            "os.execv(sys.argv[1], sys.argv[1:])"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", take_tty, *argv],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**env, "COLUMNS": "200", "TERM": "dumb"},
            start_new_session=True,
        )
        os.close(slave)
        self.output = b""
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:  # EIO: the child closed its side
                return
            if not data:
                return
            with self._lock:
                self.output += data

    def text(self) -> str:
        with self._lock:
            return self.output.decode("utf-8", "replace").replace("\r\n", "\n")

    def wait_for(self, needle: str, *, after: int = 0, timeout: float = 30.0) -> int:
        """Wait until ``needle`` appears at or after offset ``after``; return its end."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            at = self.text().find(needle, after)
            if at >= 0:
                return at + len(needle)
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(f"{needle!r} did not appear; the terminal shows:\n{self.text()}")

    def idle_reading(self, port: int, *, timeout: float = 30.0) -> bool:
        """True once the chat has taken every byte the server sent and sits idle.

        Linux only (``/proc``): the chat's socket to ``port`` has nothing left
        to read and its event loop waits in ``epoll`` -- so the piece that was
        sent has been parsed and logged before Ctrl-C is typed.
        """
        deadline = time.monotonic() + timeout
        calm = 0
        while time.monotonic() < deadline and calm < 3:
            calm = calm + 1 if _unread(port) == 0 and _waiting(self.proc.pid) else 0
            time.sleep(0.02)
        return calm >= 3

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        os.close(self.master)
        self._reader.join(timeout=5)


@pytest.mark.skipif(sys.platform != "linux", reason="needs a pseudo-terminal and /proc")
def test_ctrl_c_aborts_the_turn_in_flight_and_the_chat_goes_on(
    tmp_path: Path, loopback_emulator: tuple[Emulator, int]
) -> None:
    emulator, port = loopback_emulator
    story = "Part one of a long story. " + "And then the cache hit again. " * 200
    emulator.push({"text": story}, {"text": "Second answer, complete."})
    gate = Gate(marker=b"Part one")
    # Before the first request the app has no middleware stack yet, so this is allowed.
    emulator.app.add_middleware(gate.wrap)

    argv = [TAPELOG, "chat", "--session", "chat-pty", "--tools", "none", "--provider", "emulator"]
    term = Terminal([*argv, "--base-url", f"http://127.0.0.1:{port}/v1"], _env(tmp_path))
    try:
        seen = term.wait_for("you> ")
        term.type(b"Tell me a long story.\r")
        assert gate.holding.wait(timeout=30), term.text()
        assert term.idle_reading(port), "the chat never consumed the first streamed piece"
        term.type(b"\x03")  # Ctrl-C while the answer streams
        seen = term.wait_for("[aborted] turn 1", after=seen)
        gate.release.set()
        seen = term.wait_for("you> ", after=seen)
        term.type(b"Second prompt\r")
        seen = term.wait_for("Second answer, complete.", after=seen)
        seen = term.wait_for("[completed] turn 2", after=seen)
        term.wait_for("you> ", after=seen)
        term.type(b"\x04")  # Ctrl-D at an empty prompt
        assert term.proc.wait(timeout=30) == 0, term.text()
    finally:
        gate.release.set()
        term.close()
    assert "Traceback" not in term.text()

    events = _events(tmp_path, "chat-pty")
    ends = [e.data for e in events if e.type == "turn/end"]
    assert [(d["turn"], d["reason"]["kind"]) for d in ends] == [(1, "aborted"), (2, "completed")]
    assert ends[0]["reason"]["by"] == "interrupt"
    first, second = [e.data for e in events if e.type == "assistant/message"]
    assert first["interrupted"] is True
    cut = "".join(b["text"] for b in first["content"] if b["type"] == "text")
    assert cut.startswith("Part one")
    assert story.startswith(cut)
    assert len(cut) < len(story)
    assert "interrupted" not in second
    # the cut answer went back to the model as it was logged, before the new prompt
    assert len(emulator.received) == 2
    sent = emulator.received[1].json()["messages"]
    assert [m["role"] for m in sent[-2:]] == ["assistant", "user"]
    assert sent[-2]["content"] == cut


@pytest.mark.skipif(sys.platform != "linux", reason="needs a pseudo-terminal")
def test_ctrl_c_at_an_idle_prompt_neither_kills_nor_hangs_the_chat(tmp_path: Path) -> None:
    term = Terminal([TAPELOG, "chat", "--session", "idle", "--tools", "none"], _env(tmp_path))
    try:
        seen = term.wait_for("you> ")
        term.type(b"half a thought")
        term.type(b"\x03")  # no turn is running: the chat says so and keeps reading
        seen = term.wait_for("(no turn is running: Ctrl-C aborts a turn, Ctrl-D exits)", after=seen)
        term.type(b"hello\r")
        seen = term.wait_for("ok: hello", after=seen)
        term.wait_for("[completed] turn 1", after=seen)
        term.type(b"\x04")
        assert term.proc.wait(timeout=30) == 0, term.text()
    finally:
        term.close()
    assert "Aborted!" not in term.text()
    # the terminal dropped the half-typed line: only what came after Ctrl-C was sent
    (prompt,) = _texts(_events(tmp_path, "idle"), "user/message")
    assert prompt == "hello"


@pytest.mark.skipif(sys.platform != "linux", reason="needs a pseudo-terminal and /proc")
def test_ctrl_c_during_run_logs_an_abort_and_exits_130(
    tmp_path: Path, loopback_emulator: tuple[Emulator, int]
) -> None:
    emulator, port = loopback_emulator
    emulator.push({"text": "Part one of an answer. " + "More words follow. " * 200})
    gate = Gate(marker=b"Part one")
    emulator.app.add_middleware(gate.wrap)
    argv = [TAPELOG, "run", "Tell me everything.", "--session", "run-pty", "--tools", "none"]
    argv += ["--provider", "emulator", "--base-url", f"http://127.0.0.1:{port}/v1"]
    term = Terminal(argv, _env(tmp_path))
    try:
        assert gate.holding.wait(timeout=30), term.text()
        assert term.idle_reading(port), "run never consumed the first streamed piece"
        term.type(b"\x03")
        term.wait_for("[aborted] turn 1")
        assert term.proc.wait(timeout=30) == 130, term.text()
    finally:
        gate.release.set()
        term.close()
    assert "Traceback" not in term.text()
    events = _events(tmp_path, "run-pty")
    end = events[-2]  # then the digest that closed the last write
    assert end.type == "turn/end"
    assert end.data["reason"] == {"kind": "aborted", "by": "interrupt"}
    message = next(e for e in events if e.type == "assistant/message")
    assert message.data["interrupted"] is True


def test_slash_compact_summarises_old_history_and_the_chat_goes_on(tmp_path: Path) -> None:
    prompts = [f"question number {i} about the cache" for i in range(1, 6)]
    stdin = "/compact\n" + "\n".join(prompts) + "\n/compact\nlast one\n"
    done = _piped_chat("chat-compact", stdin, _env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "[c1] compaction failed: nothing to compact" in done.stderr
    assert "[c2] compacted history" in done.stderr
    assert "ok: last one" in done.stdout
    events = _events(tmp_path, "chat-compact")
    ends = [e.data for e in events if e.type == "compact/end"]
    assert [(d["id"], d["ok"]) for d in ends] == [("c1", False), ("c2", True)]
    summary = next(e for e in events if e.type == "user/message" and e.surface_op != "append")
    assert summary.data["source"] == {"kind": "compaction", "id": "c2"}
