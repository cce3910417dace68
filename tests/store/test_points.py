"""The conversation index's record codec and the JSONL index file's crash rules."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tapelog.store import JsonlStore
from tapelog.store._api import PointRecord

digests = st.binary(min_size=1, max_size=32)
records = st.builds(
    PointRecord,
    session_id=st.text(min_size=1, max_size=40),
    digest=digests,
    length=st.integers(0, 2**31 - 1),
    seq=st.integers(-1, 2**31 - 1),
    anchor=st.none() | digests,
    retry=st.none() | digests,
)


@given(records)
def test_a_record_decodes_to_itself(record: PointRecord) -> None:
    line = record.encode()
    assert b"\n" not in line
    assert PointRecord.decode(line) == record


@given(st.binary(max_size=200))
def test_any_line_decodes_to_a_record_or_none(line: bytes) -> None:
    decoded = PointRecord.decode(line)
    assert decoded is None or isinstance(decoded, PointRecord)


def test_a_line_a_crash_cut_short_is_skipped_and_ended(tmp_path: Path) -> None:
    log = JsonlStore(tmp_path).point_log()
    one, two = PointRecord("a", b"\x01", 1, 2), PointRecord("b", b"\x02", 3, 4)
    log.append([one])
    with log.path.open("ab") as f:
        f.write(two.encode()[:-5])  # a write cut short: no newline
    assert log.read(0) == ([one], len(one.encode()) + 1), "a reader waits for whole lines"
    log.append([two])
    got, end = log.read(0)
    assert got == [one, two]
    assert end == log.path.stat().st_size
