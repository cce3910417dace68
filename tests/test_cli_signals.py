"""SIGTERM and SIGHUP stop ``tapelog run`` and ``chat`` as a logged abort (issue 8, item 16).

A turn is held in flight at the emulator's network edge after a first piece of
text went out; the signal then aborts it like Ctrl-C does: the partial answer
is logged as an interrupted ``assistant/message``, the turn ends ``aborted``
(``by`` ``terminate`` or ``hangup``), the log is flushed, and the command exits
with 128 + the signal number, as a shell reports a process the signal killed.
Between two chat turns, where nothing is unflushed, the signal simply ends it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from _edge import Gate
from tapelog.emulator import Emulator
from tapelog.llm import encode_request
from tapelog.request._api import rebuild_requests
from tapelog.store import JsonlStore
from tapelog.store._api import verify_jsonl

TAPELOG = str(Path(sys.executable).with_name("tapelog"))


def _settled(pid: int, port: int) -> bool:
    """The client read everything the server sent and its event loop waits (Linux /proc)."""
    remote = f"0100007F:{port:04X}"
    unread = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[2] == remote and fields[3] == "01":
            unread = int(fields[4].split(":")[1], 16)
    wchan = Path(f"/proc/{pid}/task/{pid}/wchan").read_text()
    return unread == 0 and ("epoll" in wchan or wchan == "0")


def _wait_settled(pid: int, port: int) -> None:
    deadline, calm = time.monotonic() + 30, 0
    while calm < 3:
        assert time.monotonic() < deadline, "the client never consumed the first piece"
        calm = calm + 1 if _settled(pid, port) else 0
        time.sleep(0.02)


def _env(store: Path) -> dict[str, str]:
    env = {**os.environ, "TAPELOG_STORE": str(store)}
    env.pop("TAPELOG_PROVIDER", None)
    return env


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
@pytest.mark.parametrize(
    ("signum", "by"), [(signal.SIGTERM, "terminate"), (signal.SIGHUP, "hangup")]
)
def test_a_stop_signal_during_run_logs_an_abort_with_what_was_streamed(
    tmp_path: Path, loopback_emulator: tuple[Emulator, int], signum: int, by: str
) -> None:
    emulator, port = loopback_emulator
    emulator.push({"text": "Part one of an answer. " + "More words follow. " * 200})
    gate = Gate(marker=b"Part one")
    emulator.app.add_middleware(gate.wrap)
    argv = [TAPELOG, "run", "Tell me everything.", "--session", "stop", "--tools", "none"]
    argv += ["--provider", "emulator", "--base-url", f"http://127.0.0.1:{port}/v1"]
    with subprocess.Popen(
        argv, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert gate.holding.wait(timeout=30)
            _wait_settled(proc.pid, port)
            proc.send_signal(signum)
            _, err = proc.communicate(timeout=30)
        finally:
            gate.release.set()
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 128 + signum, err
    assert "[aborted] turn 1" in err
    assert "Traceback" not in err
    events = list(JsonlStore(tmp_path).load("stop").session.events)
    end = next(e for e in reversed(events) if e.type == "turn/end")
    assert end.data["reason"] == {"kind": "aborted", "by": by}
    message = next(e for e in events if e.type == "assistant/message")
    assert message.data["interrupted"] is True
    assert message.data["content"][0]["text"].startswith("Part one of an answer.")
    assert verify_jsonl((tmp_path / "stop.jsonl").read_bytes(), expected_id="stop").ok
    _assert_received_is_rebuilt(emulator, tmp_path, "stop")


def _assert_received_is_rebuilt(emulator: Emulator, root: Path, session_id: str) -> None:
    """The bytes the provider received are the requests rebuilt from the stored log."""
    session = JsonlStore(root).load(session_id).session
    rebuilt = [encode_request(r.request) for r in rebuild_requests(session, one_shots=True)]
    assert [r.body for r in emulator.received] == rebuilt


def _read_until(stream: object, needle: str, timeout: float = 30) -> str:
    """Read lines of a text pipe until one contains ``needle`` (in a thread, with a timeout)."""
    seen: list[str] = []
    found = threading.Event()

    def read() -> None:
        for line in stream:  # type: ignore[attr-defined]
            seen.append(line)
            if needle in line:
                found.set()
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert found.wait(timeout), "".join(seen)
    return "".join(seen)


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_stop_signal_during_a_chat_turn_aborts_it_then_chat_exits(
    tmp_path: Path, loopback_emulator: tuple[Emulator, int]
) -> None:
    emulator, port = loopback_emulator
    emulator.push({"text": "Part one of an answer. " + "More words follow. " * 200})
    gate = Gate(marker=b"Part one")
    emulator.app.add_middleware(gate.wrap)
    argv = [TAPELOG, "chat", "--session", "talk", "--tools", "none", "--provider", "emulator"]
    argv += ["--base-url", f"http://127.0.0.1:{port}/v1"]
    with subprocess.Popen(
        argv,
        env=_env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdin is not None
            proc.stdin.write("Tell me everything.\n")
            proc.stdin.flush()  # stdin stays open: the chat would wait for more
            assert gate.holding.wait(timeout=30)
            _wait_settled(proc.pid, port)
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
        finally:
            gate.release.set()
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "[aborted] turn 1" in err
    events = list(JsonlStore(tmp_path).load("talk").session.events)
    end = next(e for e in reversed(events) if e.type == "turn/end")
    assert end.data["reason"] == {"kind": "aborted", "by": "terminate"}
    message = next(e for e in events if e.type == "assistant/message")
    assert message.data["content"][0]["text"].startswith("Part one of an answer.")
    assert "Traceback" not in out + err
    _assert_received_is_rebuilt(emulator, tmp_path, "talk")


def test_a_stop_signal_between_chat_turns_ends_the_chat_with_everything_stored(
    tmp_path: Path,
) -> None:
    argv = [TAPELOG, "chat", "--session", "idle", "--tools", "none"]
    with subprocess.Popen(
        argv,
        env=_env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdin is not None
            assert proc.stderr is not None
            proc.stdin.write("hello\n")
            proc.stdin.flush()
            _read_until(proc.stderr, "[completed] turn 1")
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == -signal.SIGTERM  # ended by the signal, nothing left to save
    data = (tmp_path / "idle.jsonl").read_bytes()
    report = verify_jsonl(data, expected_id="idle")
    assert report.ok
    assert report.notes == ()  # no turn was left open
