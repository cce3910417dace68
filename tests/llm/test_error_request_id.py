"""A provider's request id is shown and kept only redacted and bounded.

``error_from_response`` put the raw ``x-request-id`` header in the error's
message and ``.request_id`` (issue 15, item 11): a provider, or a proxy in
between, that echoes the key there had it in every error, and so in the log
and on the terminal; a megabyte-long id made a megabyte-long message.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tapelog.llm._http import REQUEST_ID_CHARS, error_from_response
from tapelog.log import register_secret
from tapelog.log._redact import forget_secrets

KEY = "sk-reqid-Key-9f8e7d6c5b4a"


@pytest.fixture(autouse=True)
def _no_secrets_left() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


@pytest.mark.parametrize("header", ["x-request-id", "request-id"])
@pytest.mark.parametrize("registered", [True, False])
def test_a_key_in_the_request_id_is_redacted(header: str, registered: bool) -> None:
    if registered:
        register_secret(KEY)
    headers = httpx.Headers({header: f"req_{KEY}"})
    error = error_from_response("openai", 401, '{"error": "bad key"}', headers, KEY)
    assert error.request_id == "req_***"
    assert KEY not in str(error)
    assert "(request id req_***)" in str(error)


def test_a_long_or_unprintable_request_id_is_bounded() -> None:
    headers = httpx.Headers({"x-request-id": "r" * 10_000 + "\x1b[2J"})
    error = error_from_response("openai", 500, "", headers, None)
    assert error.request_id is not None
    assert len(error.request_id) == REQUEST_ID_CHARS
    assert error.request_id.endswith("…")
    assert len(str(error)) < 600
    plain = error_from_response("openai", 500, "", httpx.Headers({"x-request-id": "a\x1bb"}), None)
    assert plain.request_id == "a b"
