"""Suite-wide settings: the invariant checker is on for every test (DESIGN §6),
and caches go to a directory of the run's own."""

from __future__ import annotations

import os
import tempfile

os.environ["TAPELOG_CHECK"] = "1"
# Index files (`tapelog sessions`, `serve`) go to a cache of the run's own, not the user's.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="tapelog-test-cache-")


from collections.abc import Iterator

import pytest

from _loopback import serve_loopback
from tapelog.emulator import Emulator


@pytest.fixture
def loopback_emulator() -> Iterator[tuple[Emulator, int]]:
    """An emulator served over real TCP on 127.0.0.1 (a free port), stopped after the test."""
    emulator = Emulator()
    with serve_loopback(emulator.app) as port:
        yield emulator, port
