"""Checks for Responses API clients through the proxy: what the client sent
(recorded in front of the proxy) against what the upstream received."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from starlette.testclient import TestClient

from tapelog.cli import cli
from tapelog.emulator import Emulator
from tapelog.log import decode
from tapelog.proxy import Proxy
from tapelog.serve import create_app
from tapelog.store import JsonlStore

from ._helpers import serve, upstream_for


class Recording:
    """An ASGI app in front of another that keeps every POST body it passes on."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        parts: list[bytes] = []

        async def keep() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                parts.append(message.get("body", b""))
                if not message.get("more_body"):
                    self.bodies.append(b"".join(parts))
            return message

        await self.app(scope, keep, send)


@contextmanager
def recorded_proxy(
    store: Path, emulator_port: int, lines: list[str]
) -> Iterator[tuple[int, Recording]]:
    """A proxy to the emulator's OpenAI routes, with what clients send to it recorded."""
    proxy = Proxy(
        upstream_for("openai", emulator_port),
        JsonlStore(store),
        on_request=lambda summary: lines.append(summary.line()),
    )
    recording = Recording(proxy.app)
    with serve(recording) as port:
        yield port, recording


def assert_carried(sent: list[bytes], emulator: Emulator) -> None:
    """The parsed body the upstream received equals the client's, request by
    request; only ``stream`` may differ (the proxy always streams upstream)."""
    received = [r.json() for r in emulator.received]
    assert len(received) == len(sent)
    for client, upstream in zip((decode(b) for b in sent), received, strict=True):
        assert upstream.pop("stream") is True
        client.pop("stream", None)
        assert upstream == client


def audit_commands(store: Path, session_id: str, tmp: Path) -> dict[str, Any]:
    """``verify``, ``cache``, ``report`` and ``serve`` on a proxied session; the
    cache audit's JSON (every drop explained, the provider cached what the rule
    expects)."""
    runner = CliRunner()
    where = ["--store", str(store)]
    verified = runner.invoke(cli, ["verify", session_id, *where])
    assert verified.exit_code == 0, verified.output
    cached = runner.invoke(cli, ["cache", session_id, "--json", *where])
    assert cached.exit_code == 0, cached.output
    audit = decode(cached.output)
    causes = [c["kind"] for row in audit["requests"] for c in row["causes"]]
    assert "unexplained" not in causes
    assert audit["totals"]["efficiency"] == 1.0
    page = tmp / "report.html"
    reported = runner.invoke(cli, ["report", session_id, "-o", str(page), *where])
    assert reported.exit_code == 0, reported.output
    assert session_id in page.read_text()
    with TestClient(create_app(JsonlStore(store)), base_url="http://127.0.0.1") as client:
        assert session_id in client.get("/").text
        shown = client.get(f"/s/{session_id}")
        assert shown.status_code == 200
    assert isinstance(audit, dict)
    return audit
