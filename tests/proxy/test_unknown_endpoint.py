"""A path the proxy does not serve: the client's SDK raises its usual error with a
sentence saying what to do, and the proxy's console says it (issue 21)."""

from __future__ import annotations

from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from tapelog.emulator import Emulator

from ._helpers import proxy_on, serve, upstream_for


def test_openai_sdk_listing_models_gets_a_404_in_its_error_shape(tmp_path: Path) -> None:
    said: list[str] = []
    with (
        serve(Emulator().app) as emulator,
        proxy_on(tmp_path, upstream_for("openai", emulator), on_unknown=said.append) as port,
    ):
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-x")
        with pytest.raises(openai.NotFoundError) as refused:
            client.models.list()
    error = refused.value
    assert error.status_code == 404
    body = error.body
    assert isinstance(body, dict)
    assert body["type"] == "invalid_request_error"
    assert body["code"] == "tapelog_proxy"
    assert body["message"].startswith(
        "tapelog proxy does not serve GET /v1/models: it records POST /v1/chat/completions"
    )
    assert "(forwarded to openai); point the client's base URL" in body["message"]
    assert said == [body["message"]]
    assert not any(tmp_path.iterdir())  # nothing stored


def test_anthropic_sdk_gets_its_own_error_shape(tmp_path: Path) -> None:
    said: list[str] = []
    with (
        serve(Emulator().app) as emulator,
        proxy_on(tmp_path, upstream_for("anthropic", emulator), on_unknown=said.append) as port,
    ):
        client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="sk-x")
        with pytest.raises(anthropic.NotFoundError) as refused:
            client.models.list()
    body = refused.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "not_found_error"
    assert body["error"]["message"].startswith(
        "tapelog proxy does not serve GET /v1/models: it records POST /v1/messages"
    )
    assert said == [body["error"]["message"]]


def test_a_served_path_with_another_method_is_405_in_the_error_shape(tmp_path: Path) -> None:
    """A WebSocket upgrade of /v1/responses (Codex) is refused as before: 405, use POST."""
    said: list[str] = []
    with (
        serve(Emulator().app) as emulator,
        proxy_on(tmp_path, upstream_for("openai", emulator), on_unknown=said.append) as port,
    ):
        for path in ("/v1/responses", "/s/mine/v1/chat/completions"):
            answer = httpx.get(f"http://127.0.0.1:{port}{path}")
            assert answer.status_code == 405
            assert answer.headers["allow"] == "POST"
            assert answer.json()["error"]["message"] == f"{path} accepts POST only, not GET"
    assert said == []
