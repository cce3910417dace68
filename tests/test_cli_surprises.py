"""No silent surprises (issue 21): what a mistyped option does is said in one line."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from tapelog.cli import cli


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), obj={"debug": False})


def test_run_with_a_new_session_id_says_it_starts_a_new_session(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    first = _invoke("run", "one", "--tools", "none", "--session", "notes", "--store", str(store))
    assert first.exit_code == 0, first.output
    assert "note: no session notes in the store: started it as a new session" in first.stderr
    assert "created the store" not in first.stderr
    again = _invoke("run", "two", "--tools", "none", "--session", "notes", "--store", str(store))
    assert again.exit_code == 0, again.output
    assert "started it as a new session" not in again.stderr  # resumed


def test_run_with_a_store_that_does_not_exist_says_it_creates_it(tmp_path: Path) -> None:
    store = tmp_path / "new-store"
    result = _invoke("run", "hello", "--tools", "none", "--store", str(store))
    assert result.exit_code == 0, result.output
    assert f"note: created the store {store}\n" in result.stderr
    assert store.is_dir()
    again = _invoke("run", "hello", "--tools", "none", "--store", str(store))
    assert "created the store" not in again.stderr
