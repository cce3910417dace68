"""Tools whose JSON schema is data, not a Python signature (an MCP server's)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from tapelog.agent._tools import Tool, ToolOutcome, _BadArguments, _checked_name, _decode_arguments
from tapelog.log._api import freeze

__all__ = ["SchemaTool"]


class SchemaTool(Tool):
    """A tool whose JSON schema is data, not a Python signature.

    For tools defined elsewhere (an MCP server's, one from a config file):
    ``parameters`` is the JSON schema of the arguments, deep-frozen as given
    (its key order is part of the request bytes); ``handler`` gets the
    arguments the model produced, decoded to a JSON object, and returns a
    :class:`ToolOutcome` or a string. Arguments that are not a JSON object
    and exceptions the handler raises become error outcomes, as for
    :class:`Tool`; checking the arguments against the schema is the
    handler's job (an MCP server checks them itself).
    """

    def __init__(
        self,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        handler: Callable[[dict[str, Any]], Awaitable[ToolOutcome | str]],
    ) -> None:
        # Not Tool.__init__: there is no signature to derive a schema from, and
        # run() below replaces the signature-bound call.
        self.function = handler
        self.name = _checked_name(name)
        self.description = description
        self._is_async = True
        self.parameters = freeze(dict(parameters), path=f"tool {name} parameters")
        self._schema = freeze(
            {"name": self.name, "description": description, "parameters": self.parameters},
            path=f"tool {name} schema",
        )

    def __repr__(self) -> str:
        return f"SchemaTool(name={self.name!r})"

    async def run(self, arguments: str) -> ToolOutcome:
        """Run the handler on the raw JSON ``arguments`` the model produced."""
        try:
            raw = _decode_arguments(arguments)
        except _BadArguments as bad:
            return self._invalid(bad)
        try:
            result = await self.function(raw)
        except Exception as exc:
            return self._failed(exc)
        return self._outcome(result)
