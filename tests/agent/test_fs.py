"""The built-in fs toolset: confinement to the workspace, listing order, round trips."""

import os
from pathlib import Path

import pytest

from tapelog import ToolError
from tapelog.agent import ToolOutcome, Toolset, fs_tools
from tapelog.log import encode
from tapelog.log._api import encode_str

from ._fs_helpers import refused as _refused
from ._fs_helpers import run_tool as _run


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("hello\n", encoding="utf-8")
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text("print('hi')\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("outside", encoding="utf-8")
    return root


@pytest.fixture
def fs(workspace: Path) -> Toolset:
    return fs_tools(workspace)


def test_schemas(fs: Toolset) -> None:
    assert encode_str(fs.schemas()) == (
        '[{"name":"list_dir","description":"List a workspace directory, one entry per line, '
        'sorted; directories end in \\"/\\".","parameters":{"additionalProperties":false,'
        '"properties":{"path":{"default":".","description":"Directory path relative to the '
        'workspace root.","type":"string"}},"type":"object"}},'
        '{"name":"read_file","description":"Read a UTF-8 text file from the workspace and '
        'return its content.","parameters":{"additionalProperties":false,"properties":'
        '{"path":{"description":"File path relative to the workspace root.","type":"string"}},'
        '"required":["path"],"type":"object"}},'
        '{"name":"write_file","description":"Write a UTF-8 text file in the workspace, creating '
        'parent directories as needed.","parameters":{"additionalProperties":false,'
        '"properties":{"path":{"description":"File path relative to the workspace root.",'
        '"type":"string"},"content":{"description":"The complete new content of the file.",'
        '"type":"string"}},"required":["path","content"],"type":"object"}}]'
    )


def test_schemas_do_not_depend_on_the_workspace(tmp_path: Path, workspace: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    assert encode(fs_tools(other).schemas()) == encode(fs_tools(workspace).schemas())


async def test_read_file(fs: Toolset) -> None:
    assert await _run(fs, "read_file", path="notes.txt") == ToolOutcome(content="hello\n")
    assert await _run(fs, "read_file", path="src/main.py") == ToolOutcome(content="print('hi')\n")
    assert await _run(fs, "read_file", path="./src/../notes.txt") == ToolOutcome(content="hello\n")


async def test_list_dir_sorted_with_directory_slashes(fs: Toolset, workspace: Path) -> None:
    (workspace / "b.txt").write_text("", encoding="utf-8")
    (workspace / "a_dir").mkdir()
    (workspace / ".hidden").write_text("", encoding="utf-8")
    (workspace / "Zed").write_text("", encoding="utf-8")
    expected = ".hidden\nZed\na_dir/\nb.txt\nnotes.txt\nsrc/"
    assert await _run(fs, "list_dir") == ToolOutcome(content=expected)
    assert await _run(fs, "list_dir", path=".") == ToolOutcome(content=expected)
    assert await _run(fs, "list_dir", path="src") == ToolOutcome(content="main.py")
    assert await _run(fs, "list_dir", path="a_dir") == ToolOutcome(content="(empty directory)")


async def test_write_then_read_round_trip(fs: Toolset, workspace: Path) -> None:
    content = "line one\r\nligne deux é\n"  # 23 characters, 24 bytes
    out = await _run(fs, "write_file", path="deep/er/file.txt", content=content)
    assert out == ToolOutcome(content="wrote 24 bytes to deep/er/file.txt")
    assert (workspace / "deep" / "er" / "file.txt").read_bytes() == content.encode("utf-8")
    assert await _run(fs, "read_file", path="deep/er/file.txt") == ToolOutcome(content=content)
    out = await _run(fs, "write_file", path="notes.txt", content="replaced")
    assert out == ToolOutcome(content="wrote 8 bytes to notes.txt")
    assert await _run(fs, "read_file", path="notes.txt") == ToolOutcome(content="replaced")


@pytest.mark.parametrize("name", ["read_file", "list_dir", "write_file"])
@pytest.mark.parametrize("path", ["..", "../secret.txt", "src/../../secret.txt", "/etc/passwd"])
async def test_paths_outside_the_workspace_are_refused(
    fs: Toolset, tmp_path: Path, name: str, path: str
) -> None:
    args: dict[str, object] = {"path": path}
    if name == "write_file":
        args["content"] = "pwned"
    out = await fs.run(name, encode_str(args))
    assert out == _refused(f"path {path!r} is outside the workspace")
    assert (tmp_path / "secret.txt").read_text(encoding="utf-8") == "outside"


async def test_absolute_path_inside_the_workspace_is_refused_too(
    fs: Toolset, workspace: Path
) -> None:
    path = str(workspace / "notes.txt")
    out = await _run(fs, "read_file", path=path)
    assert out == _refused(f"path {path!r} is outside the workspace")


async def test_symlinks_pointing_outside_are_refused(
    fs: Toolset, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (workspace / "up").symlink_to(tmp_path, target_is_directory=True)
    (workspace / "dangling").symlink_to(tmp_path / "not-yet.txt")
    assert await _run(fs, "read_file", path="leak.txt") == _refused(
        "path 'leak.txt' is outside the workspace"
    )
    assert await _run(fs, "list_dir", path="up") == _refused("path 'up' is outside the workspace")
    assert await _run(fs, "read_file", path="up/secret.txt") == _refused(
        "path 'up/secret.txt' is outside the workspace"
    )
    assert await _run(fs, "write_file", path="dangling", content="x") == _refused(
        "path 'dangling' is outside the workspace"
    )
    assert await _run(fs, "write_file", path="up/new.txt", content="x") == _refused(
        "path 'up/new.txt' is outside the workspace"
    )
    assert not (tmp_path / "not-yet.txt").exists()
    assert not (tmp_path / "new.txt").exists()


async def test_symlink_inside_the_workspace_is_followed(fs: Toolset, workspace: Path) -> None:
    (workspace / "alias.txt").symlink_to(workspace / "notes.txt")
    (workspace / "code").symlink_to("src", target_is_directory=True)
    assert await _run(fs, "read_file", path="alias.txt") == ToolOutcome(content="hello\n")
    assert await _run(fs, "read_file", path="code/main.py") == ToolOutcome(content="print('hi')\n")
    listing = await _run(fs, "list_dir")
    assert listing.content == "alias.txt\ncode/\nnotes.txt\nsrc/"


async def test_read_errors_name_the_path_as_given(fs: Toolset, workspace: Path) -> None:
    (workspace / "bin.dat").write_bytes(b"\xff\xfe\x00")
    assert await _run(fs, "read_file", path="missing.txt") == _refused(
        "path 'missing.txt' does not exist"
    )
    assert await _run(fs, "read_file", path="src") == _refused(
        "path 'src' is a directory; use list_dir to see what it holds"
    )
    assert await _run(fs, "read_file", path="bin.dat") == _refused(
        "file 'bin.dat' is not UTF-8 text"
    )
    assert await _run(fs, "read_file", path="notes.txt/x") == _refused(
        "cannot read 'notes.txt/x': a parent of it is a file, not a directory"
    )
    out = await _run(fs, "read_file", path="a\x00b")
    assert out == _refused("path 'a\\x00b' is not a valid path")
    for outcome in (out, await _run(fs, "read_file", path="missing.txt")):
        assert str(workspace) not in outcome.content


async def test_read_size_cap(workspace: Path) -> None:
    small = fs_tools(workspace, max_read_bytes=10)
    (workspace / "ten.txt").write_text("0123456789", encoding="utf-8")
    (workspace / "eleven.txt").write_text("0123456789A", encoding="utf-8")
    assert await _run(small, "read_file", path="ten.txt") == ToolOutcome(content="0123456789")
    assert await _run(small, "read_file", path="eleven.txt") == _refused(
        "file 'eleven.txt' is 11 bytes, over the read limit of 10 bytes"
    )


async def test_list_and_write_errors(fs: Toolset) -> None:
    assert await _run(fs, "list_dir", path="nope") == _refused("path 'nope' does not exist")
    assert await _run(fs, "list_dir", path="notes.txt") == _refused(
        "path 'notes.txt' is a file, not a directory; use read_file to read it"
    )
    assert await _run(fs, "write_file", path="src", content="x") == _refused(
        "path 'src' is a directory; name a file to write"
    )
    assert await _run(fs, "write_file", path=".", content="x") == _refused(
        "path '.' is a directory; name a file to write"
    )
    assert await _run(fs, "write_file", path="notes.txt/inner", content="x") == _refused(
        "cannot write 'notes.txt/inner': a parent of it is a file, not a directory"
    )


async def test_missing_arguments_are_error_outcomes(fs: Toolset) -> None:
    out = await fs.run("write_file", '{"path": "a.txt"}')
    assert out.content == "invalid arguments for write_file: content: field required"
    assert out.is_error


def test_workspace_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as info:
        fs_tools(tmp_path / "missing")
    assert str(info.value) == (
        f"workspace {str(tmp_path / 'missing')!r} is not a directory; create it first"
    )


async def test_workspace_given_through_a_symlink(tmp_path: Path, workspace: Path) -> None:
    link = tmp_path / "link"
    os.symlink(workspace, link)
    via_link = fs_tools(link)
    assert await _run(via_link, "read_file", path="notes.txt") == ToolOutcome(content="hello\n")
    assert await _run(via_link, "read_file", path="../secret.txt") == _refused(
        "path '../secret.txt' is outside the workspace"
    )


async def test_symlink_loop_is_an_error_without_host_paths(fs: Toolset, workspace: Path) -> None:
    (workspace / "loop").symlink_to("loop")
    assert await _run(fs, "read_file", path="loop") == _refused("path 'loop' is not a valid path")
