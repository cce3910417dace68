"""A long session's page costs its window: the chart and the report's JSON
hold the window's requests; the totals and the table of breaks the session's."""

from __future__ import annotations

import re
from pathlib import Path

from audit._growing import Growing, TurnPlan, grow
from tapelog.audit import cache_report
from tapelog.log import decode
from tapelog.serve._live import LiveSession
from tapelog.serve._session_page import WINDOW, session_html
from tapelog.store import JsonlStore


def _data(html: str) -> dict[str, object]:
    found = re.search(r'<script type="application/json" id="tapelog-report">(.*?)</script>', html)
    assert found is not None
    return decode(found.group(1).replace("\\u003c", "<").encode())  # type: ignore[no-any-return]


def test_the_chart_and_the_json_hold_the_window(tmp_path: Path) -> None:
    root = tmp_path / "store"
    growing = Growing(root)
    grow(growing, [TurnPlan(rounds=2, low_usage=i % 5 == 2) for i in range(25)])  # 75 requests
    growing.close()
    live = LiveSession(JsonlStore(root), growing.sid)
    try:
        whole = cache_report(live.session).to_json()
        count = len(whole["requests"])
        assert count > WINDOW
        for params, first, last in (({}, WINDOW + 1, count), ({"req": "3"}, 1, WINDOW)):
            with live.lock:
                html = session_html(
                    live, params, status="idle", css="", live_script="", parents={}, children={}
                )
            bars = re.findall(r'<g class="bar[^"]*" data-index="(\d+)"', html)
            assert bars == [str(i) for i in range(first, last + 1)]
            data = _data(html)
            assert data["requests"] == whole["requests"][first - 1 : last]
            assert data["totals"] == whole["totals"]
            assert data["session"] == whole["session"]
            breaks = [r["index"] for r in whole["requests"] if r["drop"]]
            assert breaks
            assert any(b < first or b > last for b in breaks)  # some break on the other window
            for b in breaks:  # the table of breaks is the session's
                assert f'#req-{b}"' in html
    finally:
        live.close()


def test_a_first_view_without_a_checkpoint_makes_bodies_from_the_audit_s_pieces(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    growing = Growing(root)
    grow(growing, [TurnPlan(rounds=1) for _ in range(4)])
    growing.close()
    live = LiveSession(JsonlStore(root), growing.sid)
    try:
        with live.lock:
            assert live.pieces() is None
            live.audit()
            pieces = live.pieces()
            assert pieces is not None
            nodes = live.walked()[-1].nodes
            assert set(pieces(live.walked()[-1].header)) == {seq for seq, _ in nodes}
    finally:
        live.close()
