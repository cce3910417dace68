"""Retries honour the server's Retry-After and add jitter (issue 9, item 6).

* ``parse_retry_after`` reads ``retry-after-ms`` first, then ``Retry-After``
  as seconds or an HTTP date; anything else is ignored, never an error.
* ``error_from_response`` puts the delay on the ``ProviderError`` and in its message.
* ``RetryPolicy`` waits the jittered backoff, never less than the server
  asked, and refuses to wait longer than ``max_retry_after``.
* End to end on the emulator: a 429 with ``Retry-After: 2`` makes the loop
  wait 2 s (through the Agent's injectable ``sleep``), logged in the error
  chunk, and the retried request's bytes are the rebuild from the log.
"""

from __future__ import annotations

import email.utils
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent._harness import SECRET, WIRES, agent_on, assert_bytes_rebuild
from tapelog import ProviderError
from tapelog.agent import RetryPolicy
from tapelog.emulator import Emulator
from tapelog.llm._http import error_from_response, parse_retry_after

NOW = 1_750_000_000.0  # a fixed "now" for dates, in epoch seconds


def _parse(headers: dict[str, str]) -> float | None:
    return parse_retry_after(httpx.Headers(headers), now=lambda: NOW)


# --- the header parser ---------------------------------------------------------------


@given(st.integers(min_value=0, max_value=10**12))
def test_delay_seconds_are_read_as_seconds(seconds: int) -> None:
    assert _parse({"Retry-After": str(seconds)}) == seconds
    assert _parse({"retry-after": f"  {seconds}\t"}) == seconds


@given(st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False))
def test_fractional_seconds_are_accepted(seconds: Any) -> None:
    assert _parse({"retry-after": str(seconds)}) == float(str(seconds))


@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=0, max_value=10**6))
def test_retry_after_ms_wins_over_retry_after(millis: int, seconds: int) -> None:
    both = {"retry-after-ms": str(millis), "retry-after": str(seconds)}
    assert _parse(both) == millis / 1000
    assert _parse({"retry-after-ms": str(millis)}) == millis / 1000


@given(st.sampled_from(["-1", "abc", "inf", "nan", "1e3", "", "0x10"]), st.integers(0, 10**6))
def test_a_bad_retry_after_ms_falls_back_to_retry_after(bad: str, seconds: int) -> None:
    assert _parse({"retry-after-ms": bad, "retry-after": str(seconds)}) == seconds


@given(
    st.datetimes(
        min_value=datetime(1971, 1, 1), max_value=datetime(9999, 1, 1), timezones=st.just(UTC)
    )
)
def test_an_http_date_is_the_time_until_it_and_a_past_date_is_zero(when: datetime) -> None:
    when = when.replace(microsecond=0)
    expected = max(0.0, when.timestamp() - NOW)
    assert _parse({"retry-after": email.utils.format_datetime(when, usegmt=True)}) == expected


def test_the_obsolete_date_forms_are_read_too() -> None:
    later = datetime.fromtimestamp(NOW, UTC) + timedelta(seconds=90)
    rfc850 = later.strftime("%A, %d-%b-%y %H:%M:%S GMT")
    asctime = later.strftime("%a %b %e %H:%M:%S %Y")
    assert _parse({"retry-after": rfc850}) == 90
    assert _parse({"retry-after": asctime}) == 90


@given(st.text(max_size=80), st.text(max_size=80))
def test_any_header_text_gives_none_or_a_finite_delay(ms: str, seconds: str) -> None:
    for headers in ({"retry-after": seconds}, {"retry-after-ms": ms, "retry-after": seconds}):
        try:
            mapping = httpx.Headers(headers)
        except (UnicodeEncodeError, ValueError):
            continue  # not a header httpx could have received
        delay = parse_retry_after(mapping, now=lambda: NOW)
        assert delay is None or (math.isfinite(delay) and delay >= 0)


@pytest.mark.parametrize(
    "value", ["-5", "1e400", "Infinity", "NaN", "soon", "9" * 65, "Wed, 99 Foo 2015 07:28:00 GMT"]
)
def test_values_that_are_no_delay_are_ignored(value: str) -> None:
    assert _parse({"retry-after": value}) is None
    assert _parse({}) is None


# --- the error the client raises --------------------------------------------------------


def test_a_429_carries_the_delay_and_says_it() -> None:
    headers = httpx.Headers({"retry-after": "2", "request-id": "req_1"})
    error = error_from_response("anthropic", 429, '{"error": "slow"}', headers, SECRET)
    assert error.retry_after == 2.0
    assert error.retryable
    assert str(error).endswith(
        "(request id req_1). Rate limited; the provider asks to wait 2 s before retrying."
    )


def test_a_503_with_retry_after_ms_carries_it_and_no_header_carries_none() -> None:
    busy = error_from_response("deepseek", 503, "", httpx.Headers({"retry-after-ms": "1500"}), None)
    assert busy.retry_after == 1.5
    assert str(busy).endswith("retrying may help. It asks to wait 1.5 s before retrying.")
    plain = error_from_response("deepseek", 429, "", httpx.Headers(), None)
    assert plain.retry_after is None
    assert str(plain).endswith("Rate limited; wait and retry, or lower the request rate.")


# --- the retry policy -----------------------------------------------------------------


def test_equal_jitter_spreads_the_backoff_between_its_half_and_all_of_it() -> None:
    low = RetryPolicy(rng=lambda: 0.0)
    middle = RetryPolicy(rng=lambda: 0.5)
    assert [low.delay(n) for n in (1, 2, 3, 6)] == [0.25, 0.5, 1.0, 4.0]
    assert [middle.delay(n) for n in (1, 2, 3, 6)] == [0.375, 0.75, 1.5, 6.0]
    assert RetryPolicy(jitter="full", rng=lambda: 0.0).delay(3) == 0.0
    assert RetryPolicy(jitter="none").delay(3) == 2.0


@given(
    st.integers(min_value=1, max_value=10_000),
    st.floats(min_value=0, max_value=60),
    st.floats(min_value=0, max_value=1, exclude_max=True),
    st.sampled_from(["equal", "full", "none"]),
)
def test_the_wait_is_never_shorter_than_the_server_asked(
    attempt: int, retry_after: float, draw: float, jitter: Any
) -> None:
    policy = RetryPolicy(jitter=jitter, rng=lambda: draw)
    wait = policy.delay(attempt, retry_after)
    assert retry_after <= wait <= max(retry_after, policy.max_delay)
    assert policy.delay(attempt) <= policy.max_delay


def test_a_retry_after_beyond_the_cap_is_refused_with_one_readable_line() -> None:
    policy = RetryPolicy(max_retry_after=30)
    asked = ProviderError(
        "openai answered HTTP 429: x.", status=429, retryable=True, retry_after=31
    )
    assert policy.refuses(asked)
    assert not policy.refuses(ProviderError("x", retryable=True, retry_after=30))
    assert not policy.refuses(ProviderError("x", retryable=True))
    refused = policy.refused(asked)
    assert not refused.retryable
    assert refused.status == 429
    assert str(refused) == (
        "openai answered HTTP 429: x. It asked to wait 31 s, longer than the retry policy "
        "waits (RetryPolicy.max_retry_after, 30 s), so the turn ends instead; run it again "
        "later, or raise max_retry_after."
    )


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"jitter": "random"}, "RetryPolicy.jitter must be 'equal', 'full' or 'none'"),
        ({"max_attempts": 0}, "RetryPolicy.max_attempts must be at least 1"),
        ({"base_delay": -1.0}, "RetryPolicy.base_delay must be a finite number >= 0"),
        ({"max_retry_after": math.inf}, "RetryPolicy.max_retry_after must be a finite number"),
    ],
)
def test_a_bad_policy_is_refused_when_made(options: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace(".", r"\.").replace("(", r"\(")):
        RetryPolicy(**options)


# --- the emulator's scripted headers ------------------------------------------------------


async def test_the_emulator_sends_scripted_error_headers() -> None:
    emulator = Emulator(
        script=[
            {"error": {"status": 429, "headers": {"Retry-After": "7", "x-extra": "1"}}},
            {"error": {"status": 429}},
            {"error": {"status": 503, "headers": {"retry-after-ms": "250"}}},
        ]
    )
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(transport=emulator.transport(), base_url="http://e") as http:
        answers = [await http.post("/v1/chat/completions", json=body) for _ in range(3)]
    assert [a.status_code for a in answers] == [429, 429, 503]
    assert answers[0].headers.get_list("retry-after") == ["7"]  # replaces the default 0
    assert answers[0].headers["x-extra"] == "1"
    assert answers[1].headers["retry-after"] == "0"
    assert answers[2].headers["retry-after-ms"] == "250"
    assert "retry-after" not in answers[2].headers


# --- end to end: the loop waits as the server asked -------------------------------------


def _error_chunks(events: Any) -> list[Any]:
    return [
        e.data["chunk"]
        for e in events
        if e.type == "assistant/chunk" and e.data["chunk"]["kind"] == "error"
    ]


@pytest.mark.parametrize("provider", sorted(WIRES))
async def test_a_429_with_retry_after_2_waits_2_s_as_logged_and_resends_the_rebuild(
    provider: str,
) -> None:
    emulator = Emulator(
        script=[
            {"error": {"status": 429, "message": "Slow down.", "headers": {"retry-after": "2"}}},
            {"text": "done"},
        ]
    )
    slept: list[float] = []

    async def sleep(seconds: float) -> None:  # the Agent's injectable sleep: no real wait
        slept.append(seconds)

    async with agent_on(emulator, provider=provider, sleep=sleep) as agent:
        result = await agent.run("hi")
    assert result.ok, result.reason
    assert slept == [2.0]
    (chunk,) = _error_chunks(agent.session.events)
    assert chunk["status"] == 429
    assert chunk["retry_in_ms"] == 2000
    assert chunk["retry_after_ms"] == 2000
    assert "asks to wait 2 s" in chunk["message"]
    first, second = emulator.received
    assert (first.status, second.status) == (429, 200)
    assert first.body == second.body
    assert_bytes_rebuild(agent.session, emulator)


async def test_jittered_backoff_wins_over_a_shorter_retry_after_and_both_are_logged() -> None:
    emulator = Emulator(
        script=[
            {"error": {"status": 503, "message": "Busy.", "headers": {"retry-after-ms": "300"}}},
            {"error": {"status": 500, "message": "Boom."}},
            {"text": "done"},
        ]
    )
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async with agent_on(emulator, sleep=sleep) as agent:
        agent.retry = RetryPolicy(base_delay=0.5, rng=lambda: 0.5)
        result = await agent.run("hi")
    assert result.ok, result.reason
    # equal jitter at 0.5: 0.25 + 0.125 (above the 0.3 asked), then 0.5 + 0.25
    assert slept == [0.375, 0.75]
    first, second = _error_chunks(agent.session.events)
    assert (first["retry_in_ms"], first["retry_after_ms"]) == (375, 300)
    assert second["retry_in_ms"] == 750
    assert "retry_after_ms" not in second
    assert_bytes_rebuild(agent.session, emulator)


async def test_a_retry_after_beyond_the_cap_ends_the_turn_at_once_without_waiting() -> None:
    emulator = Emulator(
        script=[
            {
                "error": {
                    "status": 429,
                    "message": "Come back tomorrow.",
                    "headers": {"retry-after": "86400"},
                }
            },
            {"text": "never sent"},
        ]
    )
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async with agent_on(emulator, sleep=sleep) as agent:
        result = await agent.run("hi")
    assert slept == []
    assert len(emulator.received) == 1
    assert emulator.pending == 1
    assert result.reason["kind"] == "error"
    error = result.reason["error"]
    assert error["status"] == 429
    assert "It asked to wait 86400 s, longer than the retry policy waits" in error["message"]
    assert "\n" not in error["message"]
    assert _error_chunks(agent.session.events) == []
    assert_bytes_rebuild(agent.session, emulator)
