"""The fs toolset against a hostile model (issue 8, items 1-5).

The model is untrusted input. Each test here is one of the attacks that
worked before: planting git configuration that runs code, rewriting the
session store from ``$HOME``, racing a symlink swap, writing through a hard
link, hanging on a FIFO, unbounded writes and listings, and host paths leaking
into a model-visible result. docs/security.md, "Workspace and tools".
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tapelog import ToolError
from tapelog.agent import ToolOutcome, Toolset, fs_tools
from tapelog.cli import cli
from tapelog.log._api import encode_str

from ._fs_helpers import refused as _refused
from ._fs_helpers import run_tool as _run
from ._fs_helpers import use_fake_home

VCS = ".bzr, .git, .hg, .jj, .svn"


@pytest.fixture(autouse=True)
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_fake_home(tmp_path, monkeypatch)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("hello\n", encoding="utf-8")
    (root / "sub").mkdir()
    git = root / ".git"
    (git / "objects").mkdir(parents=True)
    (git / "refs").mkdir()
    (git / "hooks").mkdir()
    (git / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    (git / "config").write_text("[core]\n\tbare = false\n", encoding="utf-8")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("SECRET", encoding="utf-8")
    return out


@pytest.fixture
def fs(workspace: Path) -> Toolset:
    return fs_tools(workspace)


def _vcs_refusal(path: str) -> ToolOutcome:
    return _refused(
        f"cannot write {path!r}: it is version-control metadata ({VCS}), which the fs tools "
        "never write; change the working-tree files instead"
    )


def _protected(path: str) -> ToolOutcome:
    return _refused(
        f"path {path!r} is protected (the session store, tapelog's own files or the user's "
        "login and key files); the fs tools do not read, list or write it"
    )


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root`` with its bytes (``None`` for a directory)."""
    found: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            found[os.path.relpath(os.path.join(dirpath, name), root)] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            found[os.path.relpath(path, root)] = Path(path).read_bytes()
    return found


# --- 1. protected places -------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        ".git/config",
        ".GIT/config",
        ".Git/config",
        "sub/../.git/config",
        "./.git//config",
        ".git/hooks/pre-commit",
        ".git",
        ".git./config",
        ".g\u200cit/config",
        "sub/.git/config",
        "sub/.Git/HEAD",
        "new/.hg/hgrc",
        ".svn/entries",
        ".jj/repo/store",
    ],
)
async def test_git_fsmonitor_plant_is_refused(fs: Toolset, workspace: Path, path: str) -> None:
    before = _tree(workspace)
    plant = '[core]\n\tfsmonitor = "touch /tmp/pwned"\n'
    assert await _run(fs, "write_file", path=path, content=plant) == _vcs_refusal(path)
    assert _tree(workspace) == before  # nothing written, no directory made


async def test_vcs_metadata_stays_readable(fs: Toolset) -> None:
    assert await _run(fs, "read_file", path=".git/HEAD") == ToolOutcome(
        content="ref: refs/heads/main\n"
    )
    listing = await _run(fs, "list_dir", path=".git")
    assert listing.content == "HEAD\nconfig\nhooks/\nobjects/\nrefs/"


async def test_symlinks_into_git_metadata_are_refused_for_writing(
    fs: Toolset, workspace: Path
) -> None:
    (workspace / "cfg").symlink_to(".git/config")
    (workspace / "meta").symlink_to(".git", target_is_directory=True)
    (workspace / "abs").symlink_to(workspace / ".git", target_is_directory=True)
    before = _tree(workspace)
    for path in ("cfg", "meta/config", "abs/config", "sub/../meta/hooks/post-checkout"):
        assert await _run(fs, "write_file", path=path, content="x") == _vcs_refusal(path)
    assert _tree(workspace) == before


async def test_a_git_directory_under_another_name_is_refused(workspace: Path, fs: Toolset) -> None:
    # `git init --separate-git-dir`, a submodule or worktree: a `.git` file points elsewhere.
    real = workspace / "sub" / "gitdata"
    for name in ("objects", "refs"):
        (real / name).mkdir(parents=True)
    (real / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    (real / "config").write_text("[core]\n", encoding="utf-8")
    (workspace / "sub" / "wt").mkdir()
    (workspace / "sub" / "wt" / "HEAD").write_text("ref: refs/heads/x\n", encoding="utf-8")
    (workspace / "sub" / "wt" / "commondir").write_text("../gitdata\n", encoding="utf-8")
    (workspace / "sub" / "checkout").mkdir()
    (workspace / "sub" / "checkout" / ".git").write_text("gitdir: ../gitdata\n", encoding="utf-8")
    before = _tree(workspace)
    for path in ("sub/gitdata/config", "sub/gitdata/hooks/pre-commit", "sub/wt/config"):
        out = await _run(fs, "write_file", path=path, content="[core]\n\tfsmonitor = x\n")
        assert out == _refused(
            f"cannot write {path!r}: it is inside a git directory (HEAD with objects and refs), "
            "which the fs tools never write; change the working-tree files instead"
        )
    path = "sub/checkout/.git"
    assert await _run(fs, "write_file", path=path, content="gitdir: /x\n") == _vcs_refusal(path)
    assert _tree(workspace) == before


async def test_the_model_cannot_assemble_a_bare_repository(tmp_path: Path) -> None:
    # A directory holding HEAD, objects/ and refs/ is a repository git runs config from;
    # no two of the names git looks for may share a directory (test_fs_git_dirs.py).
    plain = tmp_path / "plain"
    plain.mkdir()
    fs = fs_tools(plain)
    assert (
        await _run(fs, "write_file", path="HEAD", content="ref: refs/heads/m\n")
    ).is_error is False
    for path, name in (("objects/x", "objects"), ("refs/heads/m", "refs"), ("config", "config")):
        assert await _run(fs, "write_file", path=path, content="") == _refused(
            f"cannot write {path!r}: its directory already holds HEAD, and the fs tools never "
            "put two of HEAD, objects, refs, config, commondir and gitdir in one directory "
            "(together they can make a git directory, whose configuration git runs); use "
            "another name or directory"
        )
        assert not (plain / name).exists()
    assert (await _run(fs, "write_file", path="sub/objects/x", content="")).is_error is False


async def test_a_workspace_inside_git_metadata_is_read_only(workspace: Path) -> None:
    hooks = fs_tools(workspace / ".git" / "hooks")
    out = await _run(hooks, "write_file", path="pre-commit", content="#!/bin/sh\ntouch pwned\n")
    assert out == _refused(
        "cannot write 'pre-commit': the workspace lies inside version-control metadata, "
        "which is never written"
    )
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()


async def test_protected_names_are_configurable(workspace: Path) -> None:
    tools = fs_tools(workspace, protected_names=[".github"])
    out = await _run(tools, "write_file", path=".GitHub/workflows/ci.yml", content="x")
    assert out == _refused(
        "cannot write '.GitHub/workflows/ci.yml': it is version-control metadata (.github), "
        "which the fs tools never write; change the working-tree files instead"
    )
    assert (await _run(tools, "write_file", path=".hg/x", content="x")).is_error is False


def _fake_store(home: Path) -> Path:
    """An earlier session's log in the default store under ``home``."""
    store = home / ".local" / "share" / "tapelog" / "sessions"
    (store / ".locks").mkdir(parents=True)
    (store / "old.jsonl").write_text('{"seq":0}\n', encoding="utf-8")
    (store / ".locks" / "old.lock").write_text("123\n", encoding="utf-8")
    return store


async def test_store_rewrite_from_home_is_refused(fake_home: Path) -> None:
    """Started in $HOME, the model rewrote an earlier session's log and ~/.bashrc."""
    store = _fake_store(fake_home)
    (fake_home / ".bashrc").write_text("# mine\n", encoding="utf-8")
    (fake_home / "logs").symlink_to(store, target_is_directory=True)
    (fake_home / "proj").mkdir()
    before = _tree(fake_home)
    fs = fs_tools(fake_home)
    for path in (
        ".local/share/tapelog/sessions/old.jsonl",
        ".local/share/tapelog/sessions/new.jsonl",
        ".local/share/tapelog/sessions/.locks/old.lock",
        ".LOCAL/share/tapelog/sessions/old.jsonl",
        "proj/../.local/share/tapelog/sessions/old.jsonl",
        "logs/old.jsonl",
        ".bashrc",
        ".profile",
        ".ssh/authorized_keys",
        ".config/autostart/x.desktop",
        ".gitconfig",
    ):
        assert await _run(fs, "write_file", path=path, content="pwned") == _protected(path)
    for path in ("logs/old.jsonl", ".local/share/tapelog/sessions/old.jsonl", ".bashrc"):
        assert await _run(fs, "read_file", path=path) == _protected(path)
    assert await _run(fs, "list_dir", path="logs") == _protected("logs")
    assert await _run(fs, "list_dir", path=".local") == _protected(".local")
    assert _tree(fake_home) == before
    assert (await _run(fs, "write_file", path="proj/a.txt", content="ok")).is_error is False


async def test_a_store_given_as_protected_is_refused_wherever_it_lies(
    workspace: Path, tmp_path: Path
) -> None:
    store = workspace / "runs"  # does not exist yet: made once the first session is stored
    fs = fs_tools(workspace, protected=[store])
    store.mkdir()
    (store / "s1.jsonl").write_text('{"seq":0}\n', encoding="utf-8")
    (workspace / "alias").symlink_to("runs", target_is_directory=True)
    for path in ("runs/s1.jsonl", "Runs/s2.jsonl", "alias/s1.jsonl", "sub/../runs/x"):
        assert await _run(fs, "write_file", path=path, content="x") == _protected(path)
    assert await _run(fs, "read_file", path="alias/s1.jsonl") == _protected("alias/s1.jsonl")
    assert (store / "s1.jsonl").read_text(encoding="utf-8") == '{"seq":0}\n'
    assert sorted(os.listdir(store)) == ["s1.jsonl"]


def test_a_workspace_inside_the_store_is_refused(tmp_path: Path, fake_home: Path) -> None:
    store = tmp_path / "store"
    (store / "work").mkdir(parents=True)
    with pytest.raises(ToolError, match="choose a workspace outside it"):
        fs_tools(store / "work", protected=[store])
    default = _fake_store(fake_home)
    with pytest.raises(ToolError, match="choose a workspace outside it"):
        fs_tools(default)


def test_the_cli_protects_the_store_it_uses(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "work").mkdir(parents=True)
    result = CliRunner().invoke(
        cli,
        ["run", "hi", "--store", str(store), "--workspace", str(store / "work")],
        obj={"debug": False},
    )
    assert result.exit_code == 2, result.output
    assert "choose a workspace outside it" in result.output
    assert list(store.glob("*.jsonl")) == []


# --- 2. races and links --------------------------------------------------------


def _exchanger(a: Path, b: Path) -> Callable[[], None]:
    """Swap two names atomically (``renameat2(RENAME_EXCHANGE)``), else by three renames."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is not None:
        renameat2.argtypes = [
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_uint,
        ]
    via = a.with_name(a.name + ".swap")

    def exchange() -> None:
        # AT_FDCWD is -100, RENAME_EXCHANGE 2
        if renameat2 is not None and renameat2(-100, bytes(a), -100, bytes(b), 2) == 0:
            return
        os.rename(a, via)
        while True:
            try:
                os.rename(b, a)
                break
            except OSError:  # write_file made a new directory there meanwhile: drop it
                shutil.rmtree(a, ignore_errors=True)
        os.rename(via, b)

    return exchange


def test_symlink_swap_race_never_escapes(workspace: Path, outside: Path) -> None:
    """A thread swaps a directory for a symlink to an outside directory and back
    while the tools read and write through it: nothing outside is ever touched."""
    (workspace / "d").mkdir()
    (workspace / "d" / "secret.txt").write_text("inside", encoding="utf-8")
    (workspace / "d.link").symlink_to(outside, target_is_directory=True)
    exchange = _exchanger(workspace / "d", workspace / "d.link")
    before = _tree(outside)
    fs = fs_tools(workspace)
    read_file = fs.get("read_file")
    write_file = fs.get("write_file")
    assert read_file is not None
    assert write_file is not None
    stop = threading.Event()
    swaps = 0

    def swap() -> None:
        nonlocal swaps
        while not stop.is_set():
            exchange()
            swaps += 1

    counts = {"inside": 0, "refused": 0}
    attempts = 0
    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    deadline = time.monotonic() + 15
    try:
        while attempts < 1000 or min(counts.values()) == 0:
            assert time.monotonic() < deadline, (attempts, counts)
            attempts += 1
            try:
                text = read_file.function(path="d/secret.txt")
            except ToolError:
                counts["refused"] += 1
            else:
                assert text == "inside", f"read outside the workspace on attempt {attempts}"
                counts["inside"] += 1
            for path in ("d/written.txt", f"d/new{attempts % 7}.txt"):
                try:
                    write_file.function(path=path, content="inside")
                except ToolError:
                    counts["refused"] += 1
                else:
                    counts["inside"] += 1
    finally:
        stop.set()
        swapper.join(10)
    assert attempts >= 1000
    assert swaps > 0
    assert _tree(outside) == before, "a write landed outside the workspace"


async def test_writing_through_a_hard_link_is_refused(workspace: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", workspace / "linked.txt")
    fs = fs_tools(workspace)
    out = await _run(fs, "write_file", path="linked.txt", content="pwned")
    assert out == _refused(
        "cannot write 'linked.txt': the file has 2 hard links, so writing it would also change "
        "it under its other names, possibly outside the workspace; write a new file instead"
    )
    assert (outside / "secret.txt").read_text(encoding="utf-8") == "SECRET"
    # Reading it depends on its file system (test_fs_hard_links.py).


# --- 3. FIFOs and aborts -------------------------------------------------------


def _at_once(fs: Toolset, fifo: Path, name: str, **args: object) -> ToolOutcome:
    """Run a tool on a FIFO; fail (and unblock it) if it does not answer within 2 s."""
    box: list[ToolOutcome] = []
    thread = threading.Thread(target=lambda: box.append(asyncio.run(_run(fs, name, **args))))
    started = time.monotonic()
    thread.start()
    thread.join(2)
    elapsed = time.monotonic() - started
    if thread.is_alive():  # release the blocked open so the test run can end
        for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
            try:
                os.close(os.open(fifo, flags))
            except OSError:
                continue
        thread.join(5)
        pytest.fail(f"{name} on a FIFO blocked")
    assert elapsed < 1
    return box[0]


def test_a_fifo_is_refused_at_once(workspace: Path) -> None:
    fifo = workspace / "pipe"
    os.mkfifo(fifo)
    fs = fs_tools(workspace)
    refusal = _refused(
        "path 'pipe' is a FIFO, not a regular file or directory; "
        "the fs tools read and write regular files only"
    )
    assert _at_once(fs, fifo, "read_file", path="pipe") == refusal
    assert _at_once(fs, fifo, "write_file", path="pipe", content="x") == refusal
    assert _at_once(fs, fifo, "list_dir", path="pipe") == refusal
    (workspace / "link").symlink_to("pipe")
    assert _at_once(fs, fifo, "read_file", path="link") == _refused(
        "path 'link' is a FIFO, not a regular file or directory; "
        "the fs tools read and write regular files only"
    )


_STUCK_TOOL = textwrap.dedent(
    """
    import asyncio, threading, time
    import httpx
    from tapelog.agent import Agent, tool
    from tapelog.emulator import Emulator
    from tapelog.llm import make_client
    from tapelog import LlmCallConfig, Session

    @tool
    def stuck() -> str:
        \"\"\"Block in a thread for good, as a read of a FIFO did.\"\"\"
        threading.Event().wait()
        return "never"

    async def main() -> None:
        script = [{"tool_calls": [{"name": "stuck", "arguments": "{}"}]}, {"text": "ok"}]
        emulator = Emulator(script=script)
        config = LlmCallConfig(provider="emulator", model="emulator-1")
        async with httpx.AsyncClient(transport=emulator.transport()) as http:
            agent = Agent(Session(), make_client(config, http_client=http), config=config,
                          tools=[stuck])
            aborted_at = []

            def on_event(event):
                if event.type == "tool/call":
                    def abort():
                        aborted_at.append(time.monotonic())
                        agent.abort("interrupt")
                    asyncio.get_running_loop().call_later(0.2, abort)

            agent.session.subscribe(on_event)
            result = await agent.run("go")
            took = time.monotonic() - aborted_at[0]
            print(result.reason["kind"], f"{took:.3f}", flush=True)

    asyncio.run(main())
    """
)


def test_an_abort_ends_the_turn_and_the_process_while_a_tool_is_stuck(tmp_path: Path) -> None:
    script = tmp_path / "stuck.py"
    script.write_text(_STUCK_TOOL, encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the turn's end (waits for imports too)
        ended = time.monotonic()
        kind, took = line.split()
        assert kind == "aborted"
        assert float(took) < 1.0, "the turn did not end within a second of the abort"
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pytest.fail("the process did not exit: a stuck tool thread kept it alive")
        assert time.monotonic() - ended < 2
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


# --- 4. size limits ------------------------------------------------------------


async def test_write_size_limit(workspace: Path) -> None:
    fs = fs_tools(workspace)
    big = "x" * (1024 * 1024 + 1)
    assert await _run(fs, "write_file", path="big.txt", content=big) == _refused(
        "content for 'big.txt' is 1048577 bytes, over the write limit of 1048576 bytes; "
        "nothing was written. Write smaller files"
    )
    assert not (workspace / "big.txt").exists()
    small = fs_tools(workspace, max_write_bytes=4)
    assert await _run(small, "write_file", path="notes.txt", content="ééé") == _refused(
        "content for 'notes.txt' is 6 bytes, over the write limit of 4 bytes; "
        "nothing was written. Write smaller files"
    )
    assert (workspace / "notes.txt").read_text(encoding="utf-8") == "hello\n"
    assert await _run(small, "write_file", path="notes.txt", content="éé") == ToolOutcome(
        content="wrote 4 bytes to notes.txt"
    )


async def test_list_entry_limit(workspace: Path) -> None:
    many = workspace / "many"
    many.mkdir()
    for i in range(1500):
        (many / f"f{i:04d}").touch()
    out = await _run(fs_tools(workspace), "list_dir", path="many")
    lines = out.content.split("\n")
    assert lines[:1000] == [f"f{i:04d}" for i in range(1000)]
    assert lines[1000:] == [
        "... and 500 more entries, not shown (list_dir shows at most 1000; "
        "list a subdirectory to see less at once)"
    ]
    assert not out.is_error
    few = await _run(fs_tools(workspace, max_list_entries=2), "list_dir")
    assert few.content == (
        ".git/\nmany/\n... and 2 more entries, not shown (list_dir shows at most 2; "
        "list a subdirectory to see less at once)"
    )


def test_limits_must_be_positive(workspace: Path) -> None:
    with pytest.raises(ToolError, match="max_write_bytes must be a positive number"):
        fs_tools(workspace, max_write_bytes=0)


# --- 5. no host paths in results -----------------------------------------------


@pytest.mark.parametrize("name", ["read_file", "list_dir", "write_file"])
async def test_a_name_over_name_max_does_not_leak_the_host_path(workspace: Path, name: str) -> None:
    fs = fs_tools(workspace)
    path = "sub/" + "a" * 300 + "/x"
    args: dict[str, object] = {"path": path}
    if name == "write_file":
        args["content"] = "x"
    out = await fs.run(name, encode_str(args))
    verb = {"read_file": "read", "list_dir": "list", "write_file": "write"}[name]
    shown = f"{path[:256]!r}... (306 characters)"
    assert out == _refused(
        f"cannot {verb} {shown}: a name in the path is longer than the file system allows "
        "(255 bytes); use shorter names"
    )


@pytest.fixture
def odd_workspace(workspace: Path, outside: Path) -> Iterator[Path]:
    (workspace / "loop").symlink_to("loop")
    (workspace / "out").symlink_to(outside, target_is_directory=True)
    (workspace / "denied").mkdir(mode=0o000)
    yield workspace
    (workspace / "denied").chmod(0o755)


@pytest.mark.parametrize(
    "path",
    [
        "a" * 300,
        "loop",
        "loop/x",
        "out/secret.txt",
        "out/../notes.txt",
        "../ws/notes.txt",
        "notes.txt/x",
        "missing/x",
        "a\x00b",
        "/etc/passwd",
        "denied/x",
        "/".join(["d"] * 300),
    ],
)
async def test_no_host_path_reaches_a_result(
    odd_workspace: Path, tmp_path: Path, path: str
) -> None:
    fs = fs_tools(odd_workspace)
    for name in ("read_file", "list_dir", "write_file"):
        args: dict[str, object] = {"path": path}
        if name == "write_file":
            args["content"] = "x"
        out = await fs.run(name, encode_str(args))
        assert str(tmp_path) not in out.content, (name, out.content)
        assert "failed with" not in out.content, (name, out.content)
