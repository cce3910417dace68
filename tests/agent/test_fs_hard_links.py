"""Hard links cannot read protected files (issue 15, item 7).

A hard link in the workspace to ``~/.ssh/id_rsa`` or to a session log was read
like any file. Linux cannot say where a file's other names are, but a hard
link never leaves its file system: a file with more than one link is read
only when no protected place lies on its file system. docs/security.md,
"Workspace and tools".
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tapelog.agent import ToolOutcome, fs_tools

from ._fs_helpers import refused, run_tool, use_fake_home


@pytest.fixture(autouse=True)
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_fake_home(tmp_path, monkeypatch)


def _link_refusal(path: str, links: int) -> ToolOutcome:
    return refused(
        f"cannot read {path!r}: the file has {links} hard links and lies on the same file "
        "system as a protected place (the session store, tapelog's own files or the user's "
        "login and key files), so it may be one of those under another name; the fs tools "
        "do not read such files. Ask the user for a copy"
    )


async def test_a_hard_link_to_a_key_or_a_session_log_is_not_read(
    tmp_path: Path, fake_home: Path
) -> None:
    ssh = fake_home / ".ssh"
    ssh.mkdir()
    (ssh / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n", encoding="utf-8")
    store = tmp_path / "store"
    store.mkdir()
    (store / "s1.jsonl").write_text('{"seq":0}\n', encoding="utf-8")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.link(ssh / "id_rsa", workspace / "key.txt")
    os.link(store / "s1.jsonl", workspace / "log.txt")
    os.link(store / "s1.jsonl", workspace / "log2.txt")
    fs = fs_tools(workspace, protected=[store])
    assert await run_tool(fs, "read_file", path="key.txt") == _link_refusal("key.txt", 2)
    assert await run_tool(fs, "read_file", path="./log.txt") == _link_refusal("./log.txt", 3)
    # Listing shows names only, as for any file; a file with one link reads as before.
    assert await run_tool(fs, "list_dir") == ToolOutcome(content="key.txt\nlog.txt\nlog2.txt")
    (workspace / "own.txt").write_text("mine", encoding="utf-8")
    assert await run_tool(fs, "read_file", path="own.txt") == ToolOutcome(content="mine")


async def test_a_hard_link_to_a_protected_file_is_refused_by_identity(fake_home: Path) -> None:
    """A workspace that is the home directory: the link names the file itself."""
    (fake_home / ".bashrc").write_text("# mine\n", encoding="utf-8")
    os.link(fake_home / ".bashrc", fake_home / "rc.txt")
    fs = fs_tools(fake_home)
    assert await run_tool(fs, "read_file", path="rc.txt") == refused(
        "path 'rc.txt' is protected (the session store, tapelog's own files or the user's "
        "login and key files); the fs tools do not read, list or write it"
    )


@pytest.fixture
def other_file_system() -> Iterator[Path]:
    """A directory on another file system than the test's home (``/dev/shm`` is tmpfs)."""
    with tempfile.TemporaryDirectory(dir="/dev/shm") as name:
        yield Path(name)


async def test_hard_links_elsewhere_are_read(
    other_file_system: Path, tmp_path: Path, fake_home: Path
) -> None:
    """Package managers link files from their caches (pnpm, uv): with no protected
    place on the workspace's file system, such a file reads as documented."""
    assert os.stat(other_file_system).st_dev != os.stat(fake_home).st_dev
    cache = other_file_system / "cache"
    cache.mkdir()
    (cache / "index.js").write_text("module.exports = 1;\n", encoding="utf-8")
    workspace = other_file_system / "ws"
    (workspace / "node_modules").mkdir(parents=True)
    os.link(cache / "index.js", workspace / "node_modules" / "index.js")
    fs = fs_tools(workspace, protected=[tmp_path / "store"])
    out = await run_tool(fs, "read_file", path="node_modules/index.js")
    assert out == ToolOutcome(content="module.exports = 1;\n")
    # Nothing protected at all: links read wherever they lie.
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "a.txt").write_text("A", encoding="utf-8")
    os.link(tmp_path / "plain" / "a.txt", tmp_path / "plain" / "b.txt")
    bare = fs_tools(tmp_path / "plain", protect_defaults=False)
    assert await run_tool(bare, "read_file", path="b.txt") == ToolOutcome(content="A")
