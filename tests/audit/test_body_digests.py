"""Request bodies' digests as a report page shows them (tapelog.audit._body_digests):
chained over parts, they are the SHA-256 of each body's joined bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit._growing import Growing, TurnPlan, grow
from tapelog.audit._body_digests import ChainedSha256, _Seeded, body_digests
from tapelog.audit._cache_report import audit_requests
from tapelog.audit._segments import SegmentRenderer
from tapelog.llm._api import BodyCache, wire_for
from tapelog.request import walk_requests

_part = st.binary(max_size=12)


@st.composite
def _bodies(draw: st.DrawFn) -> list[list[bytes]]:
    """Bodies as parts, each keeping a leading run of the one before (equal
    parts, some the very objects, some copies), cut anywhere, then new parts."""
    bodies: list[list[bytes]] = []
    for _ in range(draw(st.integers(1, 8))):
        before = bodies[-1] if bodies else []
        keep = draw(st.integers(0, len(before)))
        kept = [bytes(bytearray(p)) if draw(st.booleans()) else p for p in before[:keep]]
        bodies.append(kept + draw(st.lists(_part, max_size=6)))
    return bodies


@given(_bodies())
def test_a_chained_digest_is_the_sha256_of_the_joined_parts(bodies: list[list[bytes]]) -> None:
    chained = ChainedSha256()
    for parts in bodies:
        assert chained.digest(parts) == hashlib.sha256(b"".join(parts)).hexdigest()


def test_body_digests_are_the_length_and_sha256_of_each_encoded_body(tmp_path: Path) -> None:
    growing = Growing(tmp_path)
    try:
        grow(growing, [TurnPlan(rounds=2), TurnPlan(rounds=1, compact_after=True), TurnPlan()])
        walked = list(walk_requests(growing.builder.session))
    finally:
        growing.close()
    cache = BodyCache()
    expected = {}
    for item in walked:
        request = item.request()
        body = wire_for(request.config).encode_body(request, cache=cache)
        expected[item.index] = (len(body), hashlib.sha256(body).hexdigest())
    assert len(expected) >= 5
    assert body_digests(walked) == expected


def test_the_audit_s_wire_pieces_make_the_same_digests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The body digests built from the nodes' wire bytes the audit rendered
    encode no node again and equal those encoded from scratch (a compaction,
    a trim and a new loop instance included)."""
    growing = Growing(tmp_path)
    try:
        plans = [TurnPlan(rounds=2), TurnPlan(rounds=1, compact_after=True), TurnPlan()]
        more = [TurnPlan(rounds=1, new_header=True, trim_after=True), TurnPlan(rounds=2)]
        grow(growing, [*plans, *more])
        walked = list(walk_requests(growing.builder.session))
    finally:
        growing.close()
    renderer = SegmentRenderer()
    audit_requests(walked, keep=False, renderer=renderer)
    expected = body_digests(walked)
    seeded = []
    real = _Seeded.piece

    def counted(self: _Seeded, seq: int | None, message: Any, make: Any) -> Any:
        before = self.seeded
        out = real(self, seq, message, make)
        seeded.append(self.seeded > before)
        return out

    monkeypatch.setattr(_Seeded, "piece", counted)
    assert body_digests(walked, renderer.wire_pieces) == expected
    assert len(walked) >= 8
    assert seeded
    assert all(seeded)  # every node from the audit: none encoded again
