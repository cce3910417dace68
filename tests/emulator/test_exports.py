"""The emulator's constructor takes options by keyword only (sorting and completeness
of ``__all__`` are checked for every package in tests/test_public_api.py)."""

from __future__ import annotations

import inspect

from tapelog.emulator import Emulator


def test_emulator_options_are_keyword_only() -> None:
    params = inspect.signature(Emulator).parameters.values()
    assert {p.kind for p in params} == {inspect.Parameter.KEYWORD_ONLY}
