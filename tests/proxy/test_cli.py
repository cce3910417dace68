"""``tapelog proxy``: what it prints, what it refuses, and a real run in a subprocess."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from openai import OpenAI

from tapelog.cli import cli
from tapelog.cli._proxy_cmd import client_settings
from tapelog.emulator import Emulator

from ._helpers import SECRET, assert_no_secret, assert_rebuilds, serve, sessions_in


def test_a_public_host_is_refused_unless_allowed() -> None:
    result = CliRunner().invoke(cli, ["proxy", "--upstream", "openai", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "0.0.0.0 is not a loopback address" in result.output
    assert "--allow-remote" in result.output


def test_an_unknown_upstream_is_one_readable_line() -> None:
    result = CliRunner().invoke(cli, ["proxy", "--upstream", "nosuch"])
    assert result.exit_code == 2
    assert "'nosuch' is not a known provider" in result.output
    result = CliRunner().invoke(cli, ["proxy", "--upstream", "ftp://example.com"])
    assert result.exit_code == 2
    assert "must be an http:// or https:// URL" in result.output
    result = CliRunner().invoke(cli, ["proxy", "--upstream", "local"])
    assert result.exit_code == 2
    assert "runs in-process" in result.output


@pytest.mark.parametrize(
    "origin", ["localhost:3000", "ftp://localhost", "http://localhost:3000/app", "http://"]
)
def test_an_allowed_origin_that_is_not_an_origin_is_one_readable_line(origin: str) -> None:
    result = CliRunner().invoke(
        cli, ["proxy", "--upstream", "openai", "--allow-origin", origin, "--port", "0"]
    )
    assert result.exit_code == 2
    assert "is not a web origin; give scheme://host[:port]" in result.output
    assert "Traceback" not in result.output


def test_client_settings_name_the_variables_clients_read() -> None:
    assert client_settings("127.0.0.1", 9, "anthropic") == ["ANTHROPIC_BASE_URL=http://127.0.0.1:9"]
    assert client_settings("::1", 9, "openai")[0] == "OPENAI_BASE_URL=http://[::1]:9/v1"


def test_the_command_serves_and_reports_each_request(tmp_path: Path) -> None:
    store = tmp_path / "sessions"
    upstream = Emulator(script=[{"text": "hello from upstream"}])
    with serve(upstream.app) as port:
        code = "from tapelog.cli import main; main()"
        args = [
            "proxy",
            "--upstream",
            "deepseek",
            "--base-url",
            f"http://127.0.0.1:{port}/deepseek",
            "--port",
            "0",
            "--store",
            str(store),
            "--allow-origin",
            "http://localhost:3000",
        ]
        env = {**os.environ, "DEEPSEEK_API_KEY": "", "TAPELOG_PROVIDERS": ""}
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert proc.stdout is not None
            head = [proc.stdout.readline() for _ in range(6)]
            found = re.search(r"http://127\.0\.0\.1:(\d+)", head[0])
            assert found is not None, head
            proxy_port = int(found.group(1))
            assert "forwarding to deepseek" in head[0]
            assert f"export OPENAI_BASE_URL=http://127.0.0.1:{proxy_port}/v1" in "".join(head)
            assert "X-Tapelog-Session" in "".join(head)
            with OpenAI(base_url=f"http://127.0.0.1:{proxy_port}/v1", api_key=SECRET) as client:
                answer = client.chat.completions.create(
                    model="deepseek-chat", messages=[{"role": "user", "content": "hi"}]
                )
            assert answer.choices[0].message.content == "hello from upstream"
            line = proc.stdout.readline()
            url = f"http://127.0.0.1:{proxy_port}/v1/chat/completions"
            body = {"model": "deepseek-chat", "messages": [{"role": "user", "content": "x"}]}
            page = httpx.post(url, json=body, headers={"origin": "http://evil.example"})
            assert page.status_code == 403
            refused = proc.stdout.readline()
            allowed = httpx.options(
                url,
                headers={
                    "origin": "http://localhost:3000",
                    "access-control-request-method": "POST",
                },
            )
            assert allowed.headers["access-control-allow-origin"] == "http://localhost:3000"
            models = f"http://127.0.0.1:{proxy_port}/v1/models"
            assert [httpx.get(models).status_code for _ in range(2)] == [404, 404]
            unknown = proc.stdout.readline()
        finally:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert re.match(r"proxy-\S+ turn 1: 0/\d+ prompt tokens cached; new session", line), line
    assert refused.startswith("-: HTTP 403: the proxy refuses requests from web pages"), refused
    # an unknown endpoint is said on the console, once per method and path
    assert unknown.startswith("404: tapelog proxy does not serve GET /v1/models: "), unknown
    assert "does not serve" not in out
    sessions = sessions_in(store)
    assert_rebuilds(sessions, upstream)
    assert_no_secret(store, "".join(head), line, out, err)
