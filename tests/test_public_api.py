"""The public surface: every package's ``__all__`` is sorted and complete, the
names the design promises are exported, and dataclass options are keyword-only."""

from __future__ import annotations
import __future__

import importlib
import inspect
import pkgutil
import re
import types
from pathlib import Path
from typing import Any

import pytest

import tapelog


def _packages() -> list[str]:
    names = ["tapelog"]
    for info in pkgutil.walk_packages(tapelog.__path__, "tapelog."):
        leaf = info.name.rsplit(".", 1)[-1]
        if info.ispkg and not leaf.startswith("_"):
            names.append(info.name)
    return names


PACKAGES = _packages()


def _sort_key(name: str) -> tuple[int, str]:
    # The isort-style order ruff's RUF022 keeps: CONSTANTS, then Classes, then the rest.
    if name.isupper() and len(name) > 1:
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def _is_foreign(value: Any) -> bool:
    """Whether a namespace entry was imported from outside tapelog (not its API)."""
    if isinstance(value, types.ModuleType) or value is __future__.annotations:
        return True
    if inspect.isclass(value) or inspect.isroutine(value):
        return not getattr(value, "__module__", "tapelog").startswith("tapelog")
    return False


def test_the_subpackages_are_found() -> None:
    assert "tapelog.log" in PACKAGES


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, list), f"{name} has no __all__ list"
    assert exported == sorted(exported, key=_sort_key), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported), f"{name}.__all__ lists a name twice"
    missing_objects = [n for n in exported if not hasattr(module, n)]
    assert not missing_objects, f"{name}.__all__ names what the package lacks: {missing_objects}"
    public = {
        n for n, value in vars(module).items() if not n.startswith("_") and not _is_foreign(value)
    }
    unlisted = sorted(public - set(exported))
    assert not unlisted, f"{name} defines public names missing from __all__: {unlisted}"


REQUIRED = [
    "EpochHeader",
    "HeaderRecorder",
    "Session",
    "apply_header_delta",
    "canonical_header",
    "derive_event_message",
    "diff_header",
    "fold_request_header",
]


@pytest.mark.parametrize("name", REQUIRED)
def test_the_promised_names_are_exported_from_tapelog(name: str) -> None:
    assert name in tapelog.__all__
    from tapelog.log import _api

    assert getattr(tapelog, name) is getattr(_api, name)


@pytest.mark.parametrize("name", ["LlmCallConfig", "EpochHeader", "SessionInfo"])
def test_the_core_dataclasses_are_keyword_only(name: str) -> None:
    cls = getattr(tapelog, name)
    params = inspect.signature(cls).parameters.values()
    assert params
    assert all(p.kind is p.KEYWORD_ONLY for p in params)


API_DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def _documented_names() -> dict[str, list[str]]:
    """The reference section of docs/api.md: under each ``### `package```
    heading, one ``- `name`: what it is`` line per public name."""
    _, _, reference = API_DOC.read_text(encoding="utf-8").partition("\n## Reference\n")
    documented: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in reference.splitlines():
        heading = re.fullmatch(r"### `(tapelog(?:\.\w+)?)`", line)
        if heading:
            current = documented.setdefault(heading.group(1), [])
        elif line.startswith("## "):
            break
        elif current is not None and line.startswith("- `"):
            name = re.match(r"- `(\w+)`: \S", line)
            assert name, f"docs/api.md: a reference line without a description: {line!r}"
            current.append(name.group(1))
    return documented


def test_the_reference_lists_exactly_the_public_names() -> None:
    """docs/api.md's reference names every public name once and nothing else,
    so a name that becomes public (or internal) changes the page too."""
    documented = _documented_names()
    exported = {name: list(importlib.import_module(name).__all__) for name in PACKAGES}
    assert sorted(documented) == sorted(exported)
    for package, names in exported.items():
        assert sorted(documented[package]) == sorted(names), package
        assert len(set(documented[package])) == len(documented[package]), package


def test_the_user_packages_stay_small() -> None:
    """The curated surface: about eighty names through the five packages users
    import (the root, agent, llm, store, audit), counting each name once."""
    user = ["tapelog", "tapelog.agent", "tapelog.llm", "tapelog.store", "tapelog.audit"]
    names = {n for package in user for n in importlib.import_module(package).__all__}
    assert len(names) <= 100
