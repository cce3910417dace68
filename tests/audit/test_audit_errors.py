"""An unexpected error inside the audit of one request ends the audit with one
LogError naming that request's seq, not a traceback."""

from __future__ import annotations

from typing import Any

import pytest

import tapelog.audit._cache_report as cache_report_module
from audit._sessions import LogBuilder
from tapelog._errors import LogError
from tapelog.audit import cache_report
from tapelog.request import walk_requests


def test_an_error_in_one_request_names_its_seq(monkeypatch: pytest.MonkeyPatch) -> None:
    log = LogBuilder()
    for turn in range(3):
        log.user(f"question {turn}")
        log.answer(f"answer {turn}", header=turn == 0)
    session = log.session
    walked = list(walk_requests(session))
    real = cache_report_module.account
    calls = []

    def account(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise KeyError("usage")
        return real(*args, **kwargs)

    monkeypatch.setattr(cache_report_module, "account", account)
    with pytest.raises(LogError, match=f"seq {walked[1].boundary_seq}: .*cannot read") as info:
        cache_report(session, walked=walked)
    assert info.value.seq == walked[1].boundary_seq
    assert isinstance(info.value.__cause__, KeyError)
