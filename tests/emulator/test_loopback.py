"""The emulator over real TCP on loopback, and the ``tapelog emulator`` command."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import httpx
import uvicorn
from click.testing import CliRunner
from httpx_sse import aconnect_sse

from tapelog.cli._emulator_cmd import base_urls, emulator_command, is_loopback
from tapelog.emulator import Emulator
from tapelog.log import decode


async def test_streaming_request_over_real_tcp() -> None:
    emu = Emulator(
        script=[{"text": "over the wire", "tool_calls": [{"name": "f", "arguments": "{}"}]}]
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(emu.app, log_level="warning", lifespan="off", ws="none"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start within 10 s"
            time.sleep(0.02)
        body = {
            "model": "m",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "hi"}],
        }
        async with (
            httpx.AsyncClient(
                base_url=base_urls("127.0.0.1", port)["emulator"], timeout=10
            ) as client,
            aconnect_sse(client, "POST", "/chat/completions", json=body) as source,
        ):
            assert source.response.headers["content-type"].startswith("text/event-stream")
            data = [sse.data async for sse in source.aiter_sse()]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
    assert not thread.is_alive()
    assert data[-1] == "[DONE]"
    chunks = [decode(d) for d in data[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "over the wire"
    assert chunks[-1]["usage"]["prompt_tokens"] > 0
    assert emu.received[0].path == "/v1/chat/completions"


def test_command_refuses_a_public_host() -> None:
    result = CliRunner().invoke(emulator_command, ["--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "0.0.0.0 is not a loopback address" in result.output
    assert "bind 127.0.0.1, ::1 or localhost" in result.output


def test_command_refuses_a_bad_script(tmp_path: os.PathLike[str]) -> None:
    script = os.path.join(tmp_path, "bad.json")
    with open(script, "w") as f:
        f.write('[{"txet": "x"}]')
    result = CliRunner().invoke(emulator_command, ["--script", script])
    assert result.exit_code == 2
    assert "entry 0: unknown keys ['txet']" in result.output


def test_loopback_hosts() -> None:
    assert [is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost")] == [
        True
    ] * 5
    assert [is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "example.com", "::")] == [False] * 4
    assert base_urls("::1", 9) == {
        "emulator": "http://[::1]:9/v1",
        "deepseek": "http://[::1]:9/deepseek",
        "openai": "http://[::1]:9/openai/v1",
        "anthropic": "http://[::1]:9/anthropic",
    }


def test_command_serves_and_prints_base_urls(tmp_path: os.PathLike[str]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = os.path.join(tmp_path, "script.jsonl")
    with open(script, "w") as f:
        f.write('{"text": "scripted over tcp"}\n')
    code = "from tapelog.cli._emulator_cmd import emulator_command; emulator_command()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "--port", str(port), "--script", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().split() for _ in range(4)]
        urls = dict(lines)
        assert urls == base_urls("127.0.0.1", port)
        deadline = time.monotonic() + 15
        while True:
            try:
                response = httpx.post(
                    urls["anthropic"] + "/v1/messages",
                    json={
                        "model": "m",
                        "max_tokens": 5,
                        "messages": [{"role": "user", "content": "x"}],
                    },
                    timeout=5,
                )
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, "the emulator did not listen within 15 s"
                time.sleep(0.05)
        assert response.json()["content"] == [{"type": "text", "text": "scripted over tcp"}]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
