"""The ``tapelog serve`` command: loopback only, prints its URL, serves, saves its index."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
from click.testing import CliRunner

from tapelog.cli import cli

from ._helpers import HandLog, write_store


def test_a_host_that_is_not_loopback_is_refused_before_listening(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["serve", "--store", str(tmp_path), "--host", "0.0.0.0"], obj={"debug": False}
    )
    assert result.exit_code == 2
    assert "0.0.0.0 is not a loopback address" in result.output
    assert "bind 127.0.0.1, ::1 or localhost" in result.output


def test_the_command_serves_the_store_and_keeps_its_index(tmp_path: Path) -> None:
    log = HandLog("cli-1")
    log.ask("q", "a")
    write_store(tmp_path / "store", log)
    index = tmp_path / "cache" / "serve.index"
    code = "from tapelog.cli import main; main()"
    args = ["serve", "--store", str(tmp_path / "store"), "--port", "0", "--index", str(index)]
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        assert url.startswith("http://127.0.0.1:")
        assert url.endswith("/")
        page = httpx.get(url, timeout=30)
        assert page.status_code == 200
        assert 'data-id="cli-1"' in page.text
        assert httpx.get(url + "s/cli-1/requests/1.json", timeout=30).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert b"read-only; Ctrl-C stops" in err
    assert b'"id":"cli-1"' in index.read_bytes()  # saved on the way out, outside the store
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == [".locks", "cli-1.jsonl"]
