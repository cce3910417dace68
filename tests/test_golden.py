"""Golden files: a stored session and the exact request bodies it implies.

The session in tests/golden/demo/ was written by ``tapelog demo`` (tool calls, a
mid-session tool registration, a resume). If this test fails, the log format or
a wire serializer changed: old logs would no longer load, or would rebuild to
different bytes than were sent. If the change is deliberate, regenerate with
``tapelog requests tests/golden/demo/session.jsonl --out tests/golden/demo/bodies``
(and ``--wire anthropic --out .../anthropic``) and say why in the commit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tapelog.audit import encode_request, rebuild_requests
from tapelog.llm._api import AnthropicWire
from tapelog.log import decode
from tapelog.log._api import SESSION_FORMAT_VERSION
from tapelog.store._api import read_session_file, verify_jsonl

GOLDEN = Path(__file__).resolve().parent / "golden" / "demo"
SESSION = GOLDEN / "session.jsonl"


def test_the_golden_log_loads_verifies_and_re_encodes_byte_for_byte() -> None:
    data = SESSION.read_bytes()
    header = decode(data.split(b"\n", 1)[0])
    assert header["format_version"] == SESSION_FORMAT_VERSION == 0
    report = verify_jsonl(data, expected_id=header["id"])
    assert report.ok, report.problems
    assert report.warnings == ()
    loaded = read_session_file(SESSION)
    assert loaded.warnings == ()
    lines = data.rstrip(b"\n").split(b"\n")[1:]
    assert [e.encode() for e in loaded.session.events] == lines


@pytest.mark.parametrize(("folder", "wire"), [("bodies", None), ("anthropic", AnthropicWire())])
def test_the_golden_log_rebuilds_the_golden_bodies(folder: str, wire: AnthropicWire | None) -> None:
    session = read_session_file(SESSION).session
    rebuilt = rebuild_requests(session.events, session_id=session.id)
    files = sorted((GOLDEN / folder).iterdir())
    assert [f.name for f in files] == [f"{i:04d}.json" for i in range(1, len(rebuilt) + 1)]
    for item, path in zip(rebuilt, files, strict=True):
        assert encode_request(item.request, wire=wire) == path.read_bytes(), path.name
