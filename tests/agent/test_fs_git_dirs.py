"""Parallel writes cannot complete a git directory (issue 15, item 6).

The campaign: step 1 writes ``gN/config`` (``bare = true`` and a pager), step 2
writes ``gN/HEAD``, ``gN/objects/info/k`` and ``gN/refs/heads/k`` as three
parallel tool calls. Each call checked that the other two names were missing,
so now and then all three landed and ``git branch`` ran the pager. Checking
and creating such a name is now one step for every fs toolset in the process
(and for other processes that take the same directory lock), and no two of
the names git looks for may share a directory. docs/security.md, "Workspace
and tools".
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import subprocess
import threading
from pathlib import Path

import pytest

from tapelog.agent import ToolOutcome, fs_tools

from ._fs_helpers import refused, run_tool, use_fake_home

ATTEMPTS = 1000
GIT_NAMES = ("HEAD", "objects", "refs", "config", "commondir", "gitdir")
PAGER_CONFIG = "[core]\n\tbare = true\n\tpager = touch PWNED; cat\n"


@pytest.fixture(autouse=True)
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_fake_home(tmp_path, monkeypatch)


def _git_dirs(directories: list[Path]) -> list[Path]:
    """The directories real ``git`` takes for a git directory (it looks no higher)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ["HOME"],
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    found = []
    for directory in directories:
        env["GIT_CEILING_DIRECTORIES"] = str(directory.parent)
        result = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "--git-dir"],
            env=env,
            capture_output=True,
            check=False,
        )
        if result.returncode == 0:
            found.append(directory)
    return found


def _refusal(path: str, held: str) -> ToolOutcome:
    return refused(
        f"cannot write {path!r}: its directory already holds {held}, and the fs tools never "
        "put two of HEAD, objects, refs, config, commondir and gitdir in one directory "
        "(together they can make a git directory, whose configuration git runs); use "
        "another name or directory"
    )


def test_git_recognises_what_the_campaign_assembles(tmp_path: Path) -> None:
    """The check below is not vacuous: the three names next to that config are a repository."""
    made = tmp_path / "made"
    (made / "objects" / "info").mkdir(parents=True)
    (made / "refs" / "heads").mkdir(parents=True)
    (made / "HEAD").write_text("ref: refs/heads/k\n", encoding="utf-8")
    (made / "config").write_text(PAGER_CONFIG, encoding="utf-8")
    plain = tmp_path / "plain"
    plain.mkdir()
    assert _git_dirs([made, plain]) == [made]


def test_parallel_writes_never_complete_a_git_directory(tmp_path: Path) -> None:
    """1,000 campaigns, each step 2 as three concurrent calls split over two
    toolsets on the same workspace (two agents in one process): no directory
    ever becomes a repository, and without a config one name of the three wins."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "alias").symlink_to(workspace, target_is_directory=True)
    toolsets = (fs_tools(workspace), fs_tools(tmp_path / "alias"))
    step2 = (
        ("HEAD", "ref: refs/heads/k\n"),
        ("objects/info/k", ""),
        ("refs/heads/k", "0" * 40 + "\n"),
    )

    async def campaign(n: int) -> list[ToolOutcome]:
        one, two = toolsets[n % 2], toolsets[1 - n % 2]
        with_config = n % 2 == 0  # the campaign as found, and the bare race of step 2
        if with_config:
            out = await run_tool(one, "write_file", path=f"g{n}/config", content=PAGER_CONFIG)
            assert out.is_error is False, out
        return await asyncio.gather(
            *(
                run_tool(one if i != 1 else two, "write_file", path=f"g{n}/{name}", content=text)
                for i, (name, text) in enumerate(step2)
            )
        )

    async def all_campaigns() -> list[list[ToolOutcome]]:
        return [await campaign(n) for n in range(ATTEMPTS)]

    outcomes = asyncio.run(all_campaigns())
    directories = [workspace / f"g{n}" for n in range(ATTEMPTS)]
    assert _git_dirs(directories) == []
    for n, (directory, outs) in enumerate(zip(directories, outcomes, strict=True)):
        present = sorted(name for name in GIT_NAMES if os.path.lexists(directory / name))
        written = [out for out in outs if not out.is_error]
        if n % 2 == 0:
            assert present == ["config"], (n, present)
            assert written == [], (n, outs)
        else:
            assert len(present) == 1, (n, present)
            assert len(written) == 1, (n, outs)
    assert not (workspace / "PWNED").exists()


async def test_no_two_git_names_share_a_directory(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    fs = fs_tools(workspace)
    for first in GIT_NAMES:
        for second in GIT_NAMES:
            if second == first:
                continue
            d = f"{first}-{second}"
            assert (
                await run_tool(fs, "write_file", path=f"{d}/{first}", content="")
            ).is_error is False
            out = await run_tool(fs, "write_file", path=f"{d}/{second.lower()}/x", content="")
            assert out == _refusal(f"{d}/{second.lower()}/x", first)
            assert sorted(os.listdir(workspace / d)) == [first]
    # What is there already may still be written; names git does not look for may be added.
    assert (await run_tool(fs, "write_file", path="HEAD-refs/HEAD", content="x")).is_error is False
    assert (await run_tool(fs, "write_file", path="HEAD-refs/info", content="x")).is_error is False
    (workspace / "app" / "config").mkdir(parents=True)  # a project that has both already
    (workspace / "app" / "refs").mkdir()
    for path in ("app/config/routes.rb", "app/refs/notes.md"):
        assert (await run_tool(fs, "write_file", path=path, content="x")).is_error is False


def test_the_check_waits_for_another_process_holding_the_directory(tmp_path: Path) -> None:
    """Another tapelog process takes the same lock (``flock`` on the directory):
    a name it adds while holding it is seen by the check that waited."""
    workspace = tmp_path / "ws"
    (workspace / "g").mkdir(parents=True)
    fs = fs_tools(workspace)
    other = os.open(workspace / "g", os.O_RDONLY | os.O_DIRECTORY)  # an open file of its own
    box: list[ToolOutcome] = []
    try:
        fcntl.flock(other, fcntl.LOCK_EX)
        writer = threading.Thread(
            target=lambda: box.append(
                asyncio.run(run_tool(fs, "write_file", path="g/HEAD", content="ref: x\n"))
            )
        )
        writer.start()
        writer.join(0.3)
        assert writer.is_alive(), box
        (workspace / "g" / "objects").mkdir()
    finally:
        fcntl.flock(other, fcntl.LOCK_UN)
        os.close(other)
    writer.join(5)
    assert box == [_refusal("g/HEAD", "objects")]
    assert sorted(os.listdir(workspace / "g")) == ["objects"]
