"""The public surface of tapelog.emulator: sorted, complete, keyword-only constructor."""

from __future__ import annotations

import inspect

import tapelog.emulator as emulator


def test_all_is_sorted_and_names_exist() -> None:
    assert emulator.__all__ == sorted(emulator.__all__)
    assert all(hasattr(emulator, name) for name in emulator.__all__)


def test_every_public_module_attribute_is_exported() -> None:
    public = {
        name
        for name, value in vars(emulator).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert public == set(emulator.__all__)


def test_emulator_options_are_keyword_only() -> None:
    params = inspect.signature(emulator.Emulator).parameters.values()
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)
