"""MCP server configuration: the ``mcpServers`` format other clients use, and CLI specs.

A config file is a JSON object with an ``mcpServers`` (or ``servers``) object
mapping a server name to either a command to run (stdio) or a URL (streamable
HTTP)::

    {"mcpServers": {
        "time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]},
        "docs": {"url": "https://example.com/mcp",
                 "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}
    }}

Keys other clients add (``autoApprove``, ``alwaysAllow``, ...) are ignored,
``"disabled": true`` leaves a server out, and ``${VAR}`` / ``${VAR:-default}``
in any string take the value from the environment. Parsing does no I/O besides
reading the file and never imports the MCP SDK.

The secrets among the values of ``env``, ``headers`` and a URL's query are
registered as soon as they are parsed (:func:`tapelog.log.register_secret`):
a value whose name says it is one (``API_TOKEN``, ``Authorization``,
``api_key``; :func:`tapelog.log.names_a_secret`), with each word of it (the
token after ``Bearer``), any value that looks like a generated key
(:func:`tapelog.log.looks_like_secret`), and the password of any URL (the
server's own, or one in a value such as ``DATABASE_URL``). From then on they
are redacted from everything tapelog logs or shows. Other values
(``AGENT_ROLE=assistant``) are not: redacting ordinary words would garble the
log. Only a server's name and its command line are shown in messages.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tapelog._errors import JsonValueError, McpError
from tapelog.log import decode, redact, register_secret
from tapelog.log._api import looks_like_secret, names_a_secret

__all__ = ["ServerSpec", "load_config", "parse_config", "parse_server_option"]

_SERVER_NAME_RE = re.compile(r"[A-Za-z0-9](?:_?[A-Za-z0-9-])*")
MAX_SERVER_NAME = 32
"""Server names prefix tool names (``<server>__<tool>``, at most 64 characters)."""

_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_HTTP_TYPES = frozenset({"http", "streamable-http", "streamableHttp", "streamable_http"})


@dataclass(frozen=True, kw_only=True, repr=False)
class ServerSpec:
    """How to reach one MCP server: a command (stdio) or a URL (streamable HTTP).

    ``timeout`` (seconds) bounds starting the server and every request to it;
    ``None`` takes the default of :class:`tapelog.mcp.McpServers`. ``env``,
    ``headers`` and a URL's credentials and query are secrets: ``repr`` and
    every message show only :meth:`describe`.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None

    def __post_init__(self) -> None:
        _check_name(self.name)
        if (self.command is None) == (self.url is None):
            raise McpError(f"MCP server {self.name!r}: give either a command or a url")
        if self.command is not None and not self.command.strip():
            raise McpError(f"MCP server {self.name!r}: the command is empty")
        if self.url is not None:
            _check_url(self.name, self.url)
        if self.timeout is not None and not (
            isinstance(self.timeout, (int, float))
            and not isinstance(self.timeout, bool)
            and math.isfinite(self.timeout)
            and self.timeout > 0
        ):
            raise McpError(
                f"MCP server {self.name!r}: timeout must be a positive number of seconds"
            )
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "env", dict(self.env))
        object.__setattr__(self, "headers", dict(self.headers))
        _register_secrets(self)

    def __repr__(self) -> str:
        return f"ServerSpec({self.describe()!r})"

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"

    def describe(self) -> str:
        """What is safe to show: the name and the command line, or the URL without
        its credentials and query."""
        if self.command is not None:
            return f"{self.name} ({shlex.join([self.command, *self.args])})"
        parts = urllib.parse.urlsplit(self.url or "")
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        return f"{self.name} ({parts.scheme}://{host}{parts.path})"


def _check_name(name: object) -> None:
    if (
        not isinstance(name, str)
        or not _SERVER_NAME_RE.fullmatch(name)
        or len(name) > MAX_SERVER_NAME
    ):
        raise McpError(
            f"MCP server name {name!r} is not usable: use 1 to {MAX_SERVER_NAME} letters, digits, "
            "'-' or single '_' (not first or last); it prefixes the server's tool names"
        )


def _check_url(name: str, url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise McpError(
            f"MCP server {name!r}: the url must be an http:// or https:// URL with a host "
            "(the streamable HTTP endpoint, e.g. http://127.0.0.1:8000/mcp)"
        )


def _register_secrets(spec: ServerSpec) -> None:
    named: list[str] = []
    values = [*spec.env.items(), *spec.headers.items()]
    if spec.url is not None:
        parts = urllib.parse.urlsplit(spec.url)
        values.extend(urllib.parse.parse_qsl(parts.query))
        named.append(parts.password or "")
    for name, value in values:
        if names_a_secret(name):
            named.extend([value, *value.split()])
        elif looks_like_secret(value):
            named.append(value)
        elif "://" in value:
            named.append(_url_password(value))
    for value in named:
        register_secret(value)


def _url_password(value: str) -> str:
    try:
        return urllib.parse.urlsplit(value).password or ""
    except ValueError:
        return ""


def _expand(value: str, where: str, environ: Mapping[str, str]) -> str:
    """``${VAR}`` and ``${VAR:-default}`` replaced from ``environ``."""

    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = environ.get(name)
        if found is not None and (found or default is None):
            return found
        if default is not None:
            return default
        raise McpError(f"{where} uses ${{{name}}}, which is not set in the environment")

    return _VAR_RE.sub(one, value)


def _string(value: Any, where: str, environ: Mapping[str, str]) -> str:
    if not isinstance(value, str):
        raise McpError(f"{where} must be a string, not {_kind(value)}")
    return _expand(value, where, environ)


def _strings(value: Any, where: str, environ: Mapping[str, str]) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise McpError(f"{where} must be a list of strings, not {_kind(value)}")
    return tuple(_string(v, f"{where}[{i}]", environ) for i, v in enumerate(value))


def _string_map(value: Any, where: str, environ: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(value, dict):
        raise McpError(f"{where} must be an object of strings, not {_kind(value)}")
    # The key is shown, never the value: it may be a token.
    return {k: _string(v, f"{where}.{k}", environ) for k, v in value.items()}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else "something else"


def _server(name: str, entry: Any, environ: Mapping[str, str]) -> ServerSpec | None:
    where = f"mcpServers.{name}"
    if not isinstance(entry, dict):
        raise McpError(f"{where} must be an object with a command or a url, not {_kind(entry)}")
    if entry.get("disabled") is True:
        return None
    kind = entry.get("type", entry.get("transport"))
    if kind == "sse":
        raise McpError(
            f"{where}: the SSE transport is not supported; use the server's streamable HTTP "
            "endpoint (a url) or run it as a command"
        )
    if kind is not None and kind != "stdio" and kind not in _HTTP_TYPES:
        raise McpError(f"{where}.type must be 'stdio' or 'http', not {kind!r}")
    timeout = entry.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
        raise McpError(f"{where}.timeout must be a number of seconds, not {_kind(timeout)}")
    if "command" in entry:
        if "url" in entry:
            raise McpError(f"{where} has both a command and a url; keep one")
        cwd = entry.get("cwd")
        return ServerSpec(
            name=name,
            command=_string(entry["command"], f"{where}.command", environ),
            args=_strings(entry.get("args", []), f"{where}.args", environ),
            env=_string_map(entry.get("env", {}), f"{where}.env", environ),
            cwd=None if cwd is None else _string(cwd, f"{where}.cwd", environ),
            timeout=timeout,
        )
    if "url" in entry:
        return ServerSpec(
            name=name,
            url=_string(entry["url"], f"{where}.url", environ),
            headers=_string_map(entry.get("headers", {}), f"{where}.headers", environ),
            timeout=timeout,
        )
    raise McpError(f"{where} has neither a command (stdio) nor a url (streamable HTTP)")


def parse_config(
    config: Mapping[str, Any], *, environ: Mapping[str, str] | None = None
) -> list[ServerSpec]:
    """The servers of a config object (``{"mcpServers": {name: {...}}}``), by name.

    ``environ`` (default: ``os.environ``) is what ``${VAR}`` refers to.
    Disabled servers are left out. A problem is an :class:`McpError` naming the entry.
    """
    environ = os.environ if environ is None else environ
    if not isinstance(config, Mapping):
        raise McpError(f"an MCP config must be a JSON object, not {_kind(config)}")
    keys = [k for k in ("mcpServers", "servers") if k in config]
    if len(keys) != 1:
        raise McpError(
            'an MCP config needs one "mcpServers" object mapping server names to '
            '{"command", "args", "env"} or {"url", "headers"}'
        )
    servers = config[keys[0]]
    if not isinstance(servers, Mapping):
        raise McpError(f"{keys[0]} must be an object mapping server names to servers")
    specs = [_server(name, entry, environ) for name, entry in servers.items()]
    return sorted((s for s in specs if s is not None), key=lambda s: s.name)


def load_config(
    path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None
) -> list[ServerSpec]:
    """The servers of a JSON config file (see :func:`parse_config`)."""
    shown = os.fspath(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise McpError(f"cannot read MCP config {shown!r}: {exc.strerror or exc}") from None
    try:
        config = decode(data, path=shown)
    except JsonValueError as exc:
        raise McpError(f"MCP config {shown!r} is not valid JSON: {redact(exc.problem)}") from None
    try:
        return parse_config(config, environ=environ)
    except McpError as exc:
        raise McpError(f"MCP config {shown!r}: {exc}") from None


def parse_server_option(value: str) -> ServerSpec:
    """``NAME=COMMAND ARGS...`` (split like a shell line) or ``NAME=URL`` for streamable HTTP.

    A server given this way starts with the SDK's basic environment (``PATH``,
    ``HOME``, ...) and no ``env`` of its own; use a config file for those.
    """
    name, sep, rest = value.partition("=")
    if not sep or not name:
        raise McpError(
            f'--mcp {value!r} is not NAME=COMMAND, e.g. time="mcp-server-time --local-timezone UTC"'
        )
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        raise McpError(f"--mcp {name}: the command cannot be split into words ({exc})") from None
    if not words:
        raise McpError(f"--mcp {name}: the command is empty; give NAME=COMMAND")
    if len(words) == 1 and urllib.parse.urlsplit(words[0]).scheme in ("http", "https"):
        return ServerSpec(name=name, url=words[0])
    return ServerSpec(name=name, command=words[0], args=tuple(words[1:]))
