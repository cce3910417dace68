"""The upstream and the proxies ``bench_proxy.py`` measures ``tapelog proxy`` against.

- :class:`Stub`: an upstream that answers every chat completion at once with
  the same short answer, so that a proxy's added time is not lost in the
  noise of an upstream whose own time grows with the history (the
  emulator's prompt-cache accounting takes most of a second at 10,000
  messages).
- :class:`PassThrough`: the least a proxy can do, the floor for added time.
- :func:`litellm_proxy`: the LiteLLM proxy, run from its own bench-only venv
  (it pins its own versions of many packages tapelog also uses), given by
  the ``LITELLM_VENV`` environment variable::

      python3 -m venv /tmp/litellm-venv
      /tmp/litellm-venv/bin/pip install 'litellm[proxy]'
      LITELLM_VENV=/tmp/litellm-venv .venv/bin/python bench/bench_proxy.py

  Without it (or where it does not start) its column is skipped with a line
  that says why.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

KEY = "sk-bench-0123456789abcdef0123456789abcdef"
"""The key every client request carries (LiteLLM's master key: it refuses to
start without one, and then only serves requests that carry it)."""
LITELLM_VENV = "LITELLM_VENV"
_LITELLM_START_SECONDS = 240.0


class PassThrough:
    """Read the client's body, POST it upstream with httpx, stream the
    answer's bytes back. A bare ASGI app under the same uvicorn as ``tapelog
    proxy``, so the difference between the two is what tapelog does per
    request (match, log, flush, rebuild, check, relay and log the answer)."""

    def __init__(self, upstream: str) -> None:
        self.url = f"{upstream}/chat/completions"
        self.http: httpx.AsyncClient | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await receive()  # startup
            await send({"type": "lifespan.startup.complete"})
            await receive()  # shutdown
            if self.http is not None:
                await self.http.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return
        if self.http is None:
            self.http = httpx.AsyncClient(timeout=600)
        parts = []
        while True:
            message = await receive()
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        keep = (b"authorization", b"content-type")
        headers = [(k.decode(), v.decode()) for k, v in scope["headers"] if k in keep]
        request = self.http.build_request(
            "POST", self.url, content=b"".join(parts), headers=headers
        )
        response = await self.http.send(request, stream=True)
        try:
            kind = response.headers.get("content-type", "application/json").encode()
            start = {"type": "http.response.start", "status": response.status_code}
            await send({**start, "headers": [(b"content-type", kind)]})
            async for data in response.aiter_raw():
                await send({"type": "http.response.body", "body": data, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()


_ID = '"id":"chatcmpl-bench","created":0,"model":"deepseek-chat"'
_CHUNKS = (
    b"data: {" + _ID.encode() + b',"object":"chat.completion.chunk","choices":[{"index":0,'
    b'"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}\n\n'
    b"data: {" + _ID.encode() + b',"object":"chat.completion.chunk","choices":[{"index":0,'
    b'"delta":{},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)
_ANSWER = (
    b"{" + _ID.encode() + b',"object":"chat.completion","choices":[{"index":0,'
    b'"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}'
)


class Stub:
    """An OpenAI-compatible upstream that reads the whole body and answers
    ``ok`` (streamed when the body asks for a stream)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await receive()
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        parts = []
        while True:
            message = await receive()
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(parts)
        stream = b'"stream":true' in body or b'"stream": true' in body
        kind = b"text/event-stream" if stream else b"application/json"
        start = {"type": "http.response.start", "status": 200}
        await send({**start, "headers": [(b"content-type", kind)]})
        await send({"type": "http.response.body", "body": _CHUNKS if stream else _ANSWER})


def litellm_missing() -> str | None:
    """Why the LiteLLM column cannot run here (``None``: it can)."""
    venv = os.environ.get(LITELLM_VENV)
    if not venv:
        return (
            f"skipped: set {LITELLM_VENV} to a venv with litellm[proxy] installed "
            "(python3 -m venv /tmp/litellm-venv && "
            "/tmp/litellm-venv/bin/pip install 'litellm[proxy]')"
        )
    if not (Path(venv) / "bin" / "litellm").is_file():
        return f"skipped: {venv}/bin/litellm does not exist ({LITELLM_VENV}={venv})"
    return None


@contextmanager
def litellm_proxy(upstream: str, model: str) -> Iterator[str]:
    """The LiteLLM proxy forwarding ``model`` to the OpenAI-compatible
    ``upstream`` on a free loopback port; its chat-completions URL."""
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "config.yaml"
        config.write_text(
            "model_list:\n"
            f"  - model_name: {model}\n"
            "    litellm_params:\n"
            f"      model: openai/{model}\n"
            f"      api_base: {upstream}\n"
            f"      api_key: {KEY}\n"
            "litellm_settings:\n"
            "  telemetry: false\n"
            "general_settings:\n"
            f"  master_key: {KEY}\n"
        )
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        argv = [f"{os.environ[LITELLM_VENV]}/bin/litellm", "--config", str(config)]
        argv += ["--host", "127.0.0.1", "--port", str(port)]
        # The model price table is read from the package, not fetched from GitHub.
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}
        log = open(Path(scratch) / "litellm.log", "wb")  # noqa: SIM115 (closed below)
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            _wait_until_up(f"http://127.0.0.1:{port}/health/liveliness", proc, log.name)
            yield f"http://127.0.0.1:{port}/v1/chat/completions"
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


def _wait_until_up(url: str, proc: subprocess.Popen[bytes], log: str) -> None:
    deadline = time.monotonic() + _LITELLM_START_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = Path(log).read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the LiteLLM proxy exited at start:\n{tail}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the LiteLLM proxy did not start within {_LITELLM_START_SECONDS:g} s")
