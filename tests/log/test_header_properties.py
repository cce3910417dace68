"""Property tests: header deltas round-trip, the recorder picks delta or fallback
correctly, and folding a recorder-written log gives back the last header."""

from __future__ import annotations

from hypothesis import event, given, settings
from hypothesis import strategies as st

from tapelog.log import encode
from tapelog.log._api import (
    EpochHeader,
    HeaderRecorder,
    LlmCallConfig,
    Session,
    apply_header_delta,
    canonical_header,
    diff_header,
    fold_request_header,
)

from ._strategies import header_pairs, header_sequences, headers


def _bytes(header: EpochHeader) -> bytes:
    return encode(canonical_header(header))


def _session() -> Session:
    return Session("s-props", clock=lambda: 1_700_000_000_000)


@settings(deadline=None)
@given(header_pairs())
def test_recorder_logs_a_delta_exactly_when_it_round_trips(
    pair: tuple[EpochHeader, EpochHeader],
) -> None:
    a, b = pair
    session = _session()
    recorder = HeaderRecorder(session)
    first = recorder.record(a)
    assert first is not None
    assert first.type == "request/header"
    assert first.data["reason"] == "initial"
    written = recorder.record(b)
    delta = diff_header(a, b)
    if _bytes(a) == _bytes(b):
        assert delta is None
        assert written is None
        assert len(session) == 1
    else:
        assert delta is not None
        assert written is not None
        round_trips = _bytes(apply_header_delta(a, delta)) == _bytes(b)
        event(f"round_trips={round_trips}")
        if round_trips:
            assert written.type == "request/header-delta"
            assert written.data == delta
            assert _bytes(apply_header_delta(a, written.data)) == _bytes(b)
        else:
            assert written.type == "request/header"
            assert written.data["reason"] == "fallback"
            assert encode(written.data["header"]) == _bytes(b)
    assert session.header is not None
    assert _bytes(session.header) == _bytes(b)


@settings(deadline=None)
@given(header_pairs())
def test_deltas_always_round_trip_when_tools_are_in_name_order(
    pair: tuple[EpochHeader, EpochHeader],
) -> None:
    # The loop sorts tools by name unless told otherwise, so in the common case
    # every change must be expressible as a delta (fallback is the exception).
    a, b = pair
    ordered = [
        EpochHeader(
            config=h.config,
            system=h.system,
            tools=sorted(h.tools, key=lambda t: t["name"]),
            prefix=h.prefix,
        )
        for h in (a, b)
    ]
    delta = diff_header(ordered[0], ordered[1])
    if delta is not None:
        assert _bytes(apply_header_delta(ordered[0], delta)) == _bytes(ordered[1])


@settings(deadline=None)
@given(headers())
def test_diff_of_equal_headers_is_none_and_canonical_form_is_stable(header: EpochHeader) -> None:
    assert diff_header(header, header) is None
    again = canonical_header(canonical_header(header))
    assert encode(again) == _bytes(header)


@settings(max_examples=60, deadline=None)
@given(header_sequences(), st.lists(st.booleans(), min_size=6, max_size=6))
def test_folding_a_recorder_written_log_gives_the_last_header(
    sequence: list[EpochHeader], chatter: list[bool]
) -> None:
    session = _session()
    recorder = HeaderRecorder(session)
    for i, header in enumerate(sequence):
        recorder.record(header)
        if chatter[i]:
            # Other events between requests must not disturb the fold.
            session.append("turn/start", {"turn": i})
            session.append("turn/end", {"turn": i, "reason": {"kind": "completed"}})
    last = _bytes(sequence[-1])
    folded = fold_request_header(session.events)
    assert folded is not None
    assert _bytes(folded) == last
    replayed = Session.from_events(session.events)
    assert replayed.header is not None
    assert _bytes(replayed.header) == last
    # A new loop instance over the same log anchors with a resume snapshot.
    resumed = HeaderRecorder(session).record(sequence[-1])
    assert resumed is not None
    assert resumed.data["reason"] == "resume"


def test_a_header_equals_its_canonical_json_form_both_ways() -> None:
    a = EpochHeader(config=LlmCallConfig(provider="p", model="m"), system="one\ntwo")
    b = EpochHeader(
        config=LlmCallConfig(provider="p", model="m"),
        system="one\nthree",
        tools=[{"name": "t", "parameters": {"type": "object"}}],
    )
    delta = diff_header(a, b)
    assert delta is not None
    assert apply_header_delta(a, delta) == canonical_header(b)
    assert canonical_header(b) == apply_header_delta(a, delta)
    assert apply_header_delta(a, delta) != canonical_header(a)
    # empty is the same as absent, in either form
    assert EpochHeader(config=a.config, system="", tools=[]) == {"config": a.config.to_json()}
    assert a != {"config": "not a config"}


def test_headers_may_be_given_as_json_and_logged_as_objects() -> None:
    config = LlmCallConfig(provider="p", model="m")
    header = EpochHeader(config=config, system="a\nb")
    as_json = {"config": {"provider": "p", "model": "m"}, "system": "a\nc"}
    delta = diff_header(header.to_json(), as_json)
    assert delta is not None
    assert apply_header_delta(header.to_json(), delta) == as_json
    session = Session()
    event = session.append("request/header", {"header": header, "reason": "initial"})
    assert event.data["header"] == header.to_json()
    assert session.header == header
