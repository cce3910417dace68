"""Suite-wide settings: the invariant checker is on for every test (DESIGN §6)."""

from __future__ import annotations

import os

os.environ["TAPELOG_CHECK"] = "1"


import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

from tapelog.emulator import Emulator


@pytest.fixture
def loopback_emulator() -> Iterator[tuple[Emulator, int]]:
    """An emulator served over real TCP on 127.0.0.1 (a free port), stopped after the test."""
    emulator = Emulator()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(emulator.app, log_level="warning", lifespan="off", ws="none")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start within 10 s"
        time.sleep(0.02)
    try:
        yield emulator, port
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
