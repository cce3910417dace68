"""What tapelog creates is owner-only whatever the umask: the default store's
directories, parents included, and the files the user asks for (a report, OTel
spans, request bodies), which hold prompts and answers as the store does."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tapelog.cli import cli


def _invoke(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), obj={"debug": False}, env=env)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def _run(env: dict[str, str | None]) -> None:
    ran = _invoke(
        "run", "hello", "--session", "m1", "--tools", "none", "--provider", "emulator", env=env
    )
    assert ran.exit_code == 0, ran.output


def test_the_default_store_and_its_parents_under_xdg_data_home_are_0700(tmp_path: Path) -> None:
    data_home = tmp_path / "xdg" / "data"
    _run({"TAPELOG_STORE": None, "XDG_DATA_HOME": str(data_home), "HOME": str(tmp_path)})
    created = [tmp_path / "xdg", data_home, data_home / "tapelog", data_home / "tapelog/sessions"]
    assert [oct(_mode(p)) for p in created] == [oct(0o700)] * 4
    assert _mode(data_home / "tapelog/sessions/m1.jsonl") == 0o600


def test_the_default_store_under_home_is_0700_from_dot_local_down(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    _run({"TAPELOG_STORE": None, "XDG_DATA_HOME": None, "HOME": str(home)})
    local = home / ".local"
    created = [local, local / "share", local / "share/tapelog", local / "share/tapelog/sessions"]
    assert [oct(_mode(p)) for p in created] == [oct(0o700)] * 4
    assert _mode(home) == 0o755  # what existed is left alone


def test_report_otel_and_request_bodies_are_written_0600(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _run({"TAPELOG_STORE": str(store)})
    old = tmp_path / "old.html"
    old.write_text("an older report")
    old.chmod(0o644)
    report = _invoke("report", "m1", "--store", str(store), "-o", str(old))
    assert report.exit_code == 0, report.output
    spans = tmp_path / "spans.json"
    otel = _invoke("export", "otel", "m1", "--store", str(store), "--file", str(spans))
    assert otel.exit_code == 0, otel.output
    bodies = tmp_path / "bodies" / "new"
    requests = _invoke("requests", "m1", "--store", str(store), "--out", str(bodies))
    assert requests.exit_code == 0, requests.output
    assert _mode(old) == _mode(spans) == _mode(bodies / "0001.json") == 0o600
    assert _mode(bodies) == 0o700
