"""The MCP pieces on their own: config, names, schemas, results, the tool source
contract, the lazy SDK import, and failures of live servers (crash, hang)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tapelog import FrozenError, ToolError
from tapelog.agent import SchemaTool, Tool, ToolOutcome, Toolset, tool
from tapelog.log import encode, redact
from tapelog.log._redact import forget_secrets
from tapelog.mcp import McpError, McpServers, ServerSpec
from tapelog.mcp._api import parse_server_option
from tapelog.mcp._config import parse_config
from tapelog.mcp._mapping import canonical_schema, namespaced, render_result

from ._servers import ENV_SERVER, PNG, DynamicServer, wait_until


@pytest.fixture
def no_secrets() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


# --- config -------------------------------------------------------------------


def test_the_config_format_other_clients_use() -> None:
    config = {
        "mcpServers": {
            "time": {
                "command": "mcp-server-time",
                "args": ["--local-timezone", "${TZ_NAME:-UTC}"],
                "autoApprove": ["get_current_time"],  # another client's key: ignored
            },
            "docs": {"type": "http", "url": "http://127.0.0.1:9/mcp", "timeout": 5},
            "old": {"command": "x", "disabled": True},
        }
    }
    specs = parse_config(config, environ={})
    assert [s.name for s in specs] == ["docs", "time"]  # sorted, the disabled one left out
    docs, time_ = specs
    assert (docs.transport, docs.url, docs.timeout) == ("http", "http://127.0.0.1:9/mcp", 5)
    assert (time_.transport, time_.command) == ("stdio", "mcp-server-time")
    assert time_.args == ("--local-timezone", "UTC")
    assert parse_config(config, environ={"TZ_NAME": "Asia/Tokyo"})[1].args[1] == "Asia/Tokyo"
    # VS Code keeps the same entries under "servers"
    assert parse_config({"servers": {"a": {"command": "x"}}})[0].name == "a"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, 'needs one "mcpServers" object'),
        ({"mcpServers": []}, "mcpServers must be an object"),
        ({"mcpServers": {"a": "x"}}, "mcpServers.a must be an object"),
        ({"mcpServers": {"a": {}}}, "has neither a command (stdio) nor a url"),
        ({"mcpServers": {"a": {"command": "x", "url": "http://h/"}}}, "both a command and a url"),
        ({"mcpServers": {"a": {"command": "x", "args": "-v"}}}, "args must be a list"),
        ({"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}, "env.K must be a string"),
        ({"mcpServers": {"a": {"url": "ftp://h/"}}}, "must be an http:// or https:// URL"),
        ({"mcpServers": {"a": {"command": "x", "timeout": 0}}}, "timeout must be a positive"),
        ({"mcpServers": {"a": {"command": "x", "type": "ws"}}}, "type must be 'stdio' or 'http'"),
        ({"mcpServers": {"_a": {"command": "x"}}}, "name '_a' is not usable"),
        ({"mcpServers": {"a_": {"command": "x"}}}, "name 'a_' is not usable"),
        ({"mcpServers": {"a" * 33: {"command": "x"}}}, "is not usable"),
        ({"mcpServers": {"my.server": {"command": "x"}}}, "is not usable"),
    ],
)
def test_config_errors_name_the_entry(config: Any, message: str) -> None:
    with pytest.raises(McpError) as caught:
        parse_config(config, environ={})
    assert message in str(caught.value)


def test_cli_server_options() -> None:
    spec = parse_server_option('time=mcp-server-time --local-timezone "America/New_York"')
    assert (spec.name, spec.command) == ("time", "mcp-server-time")
    assert spec.args == ("--local-timezone", "America/New_York")
    assert parse_server_option("docs=https://example.com/mcp").url == "https://example.com/mcp"
    for bad, message in [
        ("time", "is not NAME=COMMAND"),
        ("=x", "is not NAME=COMMAND"),
        ("t=", "the command is empty"),
        ("t='open", "cannot be split into words"),
        ("t t=x", "is not usable"),
    ]:
        with pytest.raises(McpError, match=message):
            parse_server_option(bad)


def test_env_values_and_tokens_are_secrets_from_the_start(no_secrets: None) -> None:
    spec = ServerSpec(
        name="api",
        url="https://user:pass-word-99@example.com/mcp?key=query-secret-123",
        headers={"Authorization": "Bearer tok-abcdef-123456"},
    )
    stdio = ServerSpec(name="gh", command="gh-mcp", env={"GITHUB_TOKEN": "ghp_0123456789abc"})
    text = "tok-abcdef-123456 ghp_0123456789abc query-secret-123 pass-word-99"
    assert redact(text) == "*** *** *** ***"
    shown = f"{spec!r} {spec.describe()} {stdio!r} {stdio.describe()}"
    for secret in ("tok-abcdef", "ghp_0123", "query-secret", "pass-word"):
        assert secret not in shown
    assert spec.describe() == "api (https://example.com/mcp)"
    assert stdio.describe() == "gh (gh-mcp)"


# --- names, schemas, results ---------------------------------------------------


def test_tool_names_are_namespaced_and_always_fit() -> None:
    assert namespaced("time", "get_current_time") == "time__get_current_time"
    dotted = namespaced("files", "read.file")
    assert dotted.startswith("files__read_file_")
    assert len(dotted) == len("files__read_file_") + 8
    assert dotted == namespaced("files", "read.file")  # deterministic
    assert dotted != namespaced("files", "read_file")  # which stays as it is
    long_name = namespaced("a-long-server-name", "x" * 128)
    assert len(long_name) == 64
    for name in (dotted, long_name, namespaced("s", "ü/ö")):
        SchemaTool(name, "", {"type": "object"}, _echo)  # the tool-name rule accepts it


def test_schemas_are_canonical_and_frozen() -> None:
    one = {"type": "object", "required": ["b", "a"], "properties": {"b": {"type": "string"},
           "a": {"type": "integer", "description": "A"}}}  # fmt: skip
    two = {"properties": {"a": {"description": "A", "type": "integer"},
           "b": {"type": "string"}}, "required": ["b", "a"], "type": "object"}  # fmt: skip
    assert encode(canonical_schema(one, path="p")) == encode(canonical_schema(two, path="p"))
    assert encode(canonical_schema(one, path="p")).startswith(b'{"properties":{"a":{"desc')
    with pytest.raises(FrozenError):
        canonical_schema(one, path="p")["type"] = "array"


def test_results_become_bounded_text() -> None:
    result = {
        "content": [
            {"type": "text", "text": "Here:"},
            {"type": "image", "mimeType": "image/png", "data": "AAAAAAAA"},
            {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "alpha"}},
            {
                "type": "resource",
                "resource": {"uri": "file:///b", "mimeType": "x/y", "blob": "AA=="},
            },
            {"type": "resource_link", "uri": "file:///c", "name": "c", "description": "the c"},
        ],
        "structuredContent": {"ignored": "a text part carries it"},
    }
    assert render_result(result, limit=1000).splitlines() == [
        "Here:",
        "[image: image/png, 6 bytes, not shown]",
        "[audio: audio/wav, 3 bytes, not shown]",
        "[resource: file:///a.txt]",
        "alpha",
        "[resource: file:///b, x/y, 1 bytes, binary, not shown]",
        "[resource link: c, file:///c] the c",
    ]
    assert render_result({"content": [], "structuredContent": {"b": 1, "a": [2]}}, limit=99) == (
        '{"b":1,"a":[2]}'
    )
    assert render_result({"content": []}, limit=100) == "(no content)"
    cut = render_result({"content": [{"type": "text", "text": "x" * 50}]}, limit=10)
    assert cut == "x" * 10 + "\n[truncated: the result had 50 characters; the first 10 are shown]"


# --- the tool source contract ------------------------------------------------


async def _echo(arguments: dict[str, Any]) -> str:
    return f"got {arguments}"


class _Source:
    def __init__(self, *tools: Tool) -> None:
        self.current = list(tools)
        self.refreshed = 0

    def tools(self) -> list[Tool]:
        return self.current

    async def refresh(self) -> None:
        self.refreshed += 1

    def missing_tool(self, name: str) -> ToolOutcome | None:
        if name.startswith("gone__"):
            return ToolOutcome(content="that server went away", is_error=True)
        return None


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


async def test_a_toolset_offers_what_its_sources_have_now() -> None:
    dynamic = SchemaTool("b__dyn", "Dynamic.", {"type": "object"}, _echo)
    clash = SchemaTool("ping", "Hidden by the static tool.", {"type": "object"}, _echo)
    source = _Source(dynamic, clash)
    tools = Toolset([ping, source])
    assert [s["name"] for s in tools.schemas()] == ["b__dyn", "ping"]
    assert tools.get("ping") is ping  # the toolset's own tool wins a clash
    assert (await tools.run("b__dyn", '{"x": 1}')).content == "got {'x': 1}"
    bad = await tools.run("b__dyn", "[1]")
    assert bad.is_error
    assert bad.error is not None
    assert bad.error["kind"] == "invalid_arguments"
    source.current = [SchemaTool("a__new", "New.", {"type": "object"}, _echo)]
    assert [s["name"] for s in tools.schemas()] == ["a__new", "ping"]
    await tools.refresh()
    assert source.refreshed == 1
    assert (await tools.run("gone__x", "{}")).content == "that server went away"
    assert "there is no tool named 'nope'" in (await tools.run("nope", "{}")).content
    with pytest.raises(ToolError, match="neither a Tool nor a ToolSource"):
        Toolset([object()])  # type: ignore[list-item]


def test_importing_tapelog_does_not_import_the_sdk() -> None:
    code = (
        "import sys, tapelog, tapelog.agent, tapelog.mcp, tapelog.cli; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')); "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("missing", ["mcp", "httpx2"])
def test_without_the_sdk_starting_a_server_says_how_to_install_it(missing: str) -> None:
    """Whichever module of the SDK's is missing, the sentence names the extra, not it."""
    code = (
        f"import sys, asyncio; sys.modules[{missing!r}] = None\n"
        "from tapelog.mcp import McpServers, ServerSpec, McpError\n"
        "try:\n"
        "    asyncio.run(McpServers([ServerSpec(name='x', command='y')]).start())\n"
        "except McpError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout == (
        "MCP servers need the mcp extra (the official MCP Python SDK), which is not "
        "installed: pip install 'tapelog[mcp]'\n"
    )


# --- live servers going wrong ------------------------------------------------


@pytest.fixture(scope="module")
def dyn() -> Iterator[DynamicServer]:
    with DynamicServer().running() as server:
        yield server


async def test_a_hung_server_times_out_and_stays_usable(dyn: DynamicServer) -> None:
    async with McpServers([ServerSpec(name="dyn", url=dyn.url, timeout=1)]) as servers:
        tools = Toolset([servers])
        started = time.monotonic()
        hung = await tools.run("dyn__stall", "{}")
        assert time.monotonic() - started < 10
        assert hung.is_error
        assert hung.content == (
            "the MCP server 'dyn' did not answer stall within 1 s; the call was abandoned"
        )
        assert hung.error is not None
        assert (hung.error["kind"], hung.error["server"], hung.error["type"]) == (
            "mcp", "dyn", "timeout",
        )  # fmt: skip
        assert (await tools.run("dyn__echo", '{"text": "still here"}')).content == "still here"
        picture = await tools.run("dyn__picture", "{}")
        assert picture.content == f"a tiny square\n[image: image/png, {len(PNG)} bytes, not shown]"


async def test_a_server_that_dies_mid_call_is_a_readable_error() -> None:
    spec = ServerSpec(name="env", command=sys.executable, args=(ENV_SERVER,))
    async with McpServers([spec]) as servers:
        tools = Toolset([servers])
        crashed = await tools.run("env__crash", "{}")
        assert crashed.is_error
        assert crashed.error is not None
        assert (crashed.error["server"], crashed.error["type"]) == ("env", "closed")
        assert "the MCP server 'env' went away during crash" in crashed.content
        await wait_until(lambda: servers.status()["env"].state == "closed")
        assert tools.schemas() == []
        again = await tools.run("env__whoami", "{}")
        assert again.error is not None
        assert again.error["type"] == "not_running"
        # It comes back only when asked to.
        await servers.add(spec)
        assert [s["name"] for s in tools.schemas()] == ["env__crash", "env__fail", "env__whoami"]
