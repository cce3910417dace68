"""Structured output: a turn whose answer is a validated object, not free text.

``Agent.run(prompt, output_type=Model)`` asks the model for an answer that
matches a JSON schema (a pydantic model's, or one given as a dict) and returns
the validated value as ``TurnResult.output``. How the schema reaches the model
depends on what the provider's wire can enforce (docs/providers.md,
"Structured output"):

* ``json_schema`` -- OpenAI-compatible ``response_format: {"type":
  "json_schema", ...}`` (OpenAI, vLLM, Ollama, the emulator's ``/openai`` route),
  or ``text: {"format": {"type": "json_schema", ...}}`` on the Responses API;
* ``json_object`` -- ``response_format: {"type": "json_object"}`` plus the
  schema in a logged instruction (DeepSeek, which has no JSON-schema mode);
* ``tool`` -- a forced output tool (``final_result``) whose call arguments are
  the answer (the Anthropic default);
* ``prompted`` -- the schema in a logged instruction, nothing else (the
  in-process ``local`` model).

Every one of them is model-visible, so every one is logged: the extra body
fields go into the step's ``config.extras`` and the output tool into the
header's tools (both logged as header deltas by the recorder), an instruction
is a ``context/message`` (``source.kind`` ``output-instructions``), and an
answer that does not validate gets a model-visible retry: a
``context/message`` with ``source.kind`` ``output-validation`` naming the
errors, or, for the output tool, an error ``tool/result``. After
``OutputSpec.retries`` failed retries the turn ends with ``reason.kind``
``error`` (``error.type`` ``OutputValidationError``). The shaping is a pure
function of the unshaped config, the tools and the header folded from the
log, so the requests rebuild from the log like any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any, Final, Literal, TypeAlias

import pydantic

from tapelog._errors import OutputError
from tapelog.agent._hooks import text_blocks
from tapelog.agent._output_schema import OutputSchema, output_schema, strict_default, unfenced
from tapelog.agent._tools import ToolOutcome, Toolset
from tapelog.agent._turn import Outcome, final_text
from tapelog.cache._api import OUTPUT_MODES
from tapelog.llm import wire_profile
from tapelog.llm._api import ResponsesWire, complete_config, wire_for
from tapelog.log._api import (
    EpochHeader,
    Event,
    FrozenDict,
    LlmCallConfig,
    Session,
    encode_str,
    freeze,
)

__all__ = [
    "DEFAULT_OUTPUT_RETRIES",
    "OUTPUT_TOOL",
    "OutputMode",
    "OutputRun",
    "OutputSpec",
    "OutputType",
    "output_toolset",
    "shape_request",
]

OUTPUT_TOOL: Final = "final_result"
"""The name of the output tool (tool mode); a toolset may not have a tool of that name."""

DEFAULT_OUTPUT_RETRIES: Final = 2
"""Retries after an answer that does not validate (so at most three answers)."""

OutputMode = Literal["auto", "json_schema", "json_object", "tool", "prompted"]
"""``auto`` or one of the wire profiles' modes (``tapelog.cache.OUTPUT_MODES``)."""

_MODES: Final = ("auto", *OUTPUT_MODES)
_ACCEPTED: Final = "accepted"
_UNSET: Final = object()


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """What a structured turn must answer with, and how to ask for it.

    ``type`` is a pydantic model class or a JSON schema (a dict). ``name``
    labels the schema for the provider (default: the model's class name or the
    schema's ``title``); ``description`` tells the model what the output is
    for. ``mode`` picks how the schema reaches the model (``auto``: the best the
    provider's wire enforces, see the module docstring). ``strict`` is OpenAI's
    strict JSON-schema flag (``None``: on when the schema allows it, i.e. every
    object closes ``additionalProperties`` and requires all its properties).
    ``retries`` is how many times an answer that does not validate is sent
    back with its errors before the turn ends as an error.
    """

    type: type[pydantic.BaseModel] | Mapping[str, Any]
    _: KW_ONLY
    name: str | None = None
    description: str | None = None
    mode: OutputMode = "auto"
    strict: bool | None = None
    retries: int = DEFAULT_OUTPUT_RETRIES

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise OutputError(
                f"OutputSpec.mode must be one of {', '.join(_MODES)}, not {self.mode!r}."
            )
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise OutputError(
                f"OutputSpec.retries must be a non-negative integer, not {self.retries!r}."
            )


OutputType: TypeAlias = "type[pydantic.BaseModel] | Mapping[str, Any] | OutputSpec"
"""What ``Agent.run(output_type=...)`` takes."""


# --- choosing how to ask --------------------------------------------------------------------


def _anthropic(config: LlmCallConfig) -> bool:
    """``tool_choice`` is spelled the Anthropic way on this config's wire."""
    return wire_profile(config).family == "anthropic"


def _responses(config: LlmCallConfig) -> bool:
    """The config's requests go to the Responses API (``config.wire.api``)."""
    return isinstance(wire_for(complete_config(config)), ResponsesWire)


def _resolve(spec: OutputSpec, config: LlmCallConfig) -> tuple[str, bool]:
    """The mode for the config's wire, and whether the output tool is forced.

    Both follow from the wire's profile (``tapelog.cache.WIRE_PROFILES``), the
    facts the emulator refuses by too.
    """
    profile = wire_profile(config)
    mode: str = profile.auto_output if spec.mode == "auto" else spec.mode
    refusal = profile.output_refusal(mode)
    if refusal is not None:
        usable = " or ".join(repr(m) for m in profile.output_modes())
        raise OutputError(
            f"output mode {mode!r} cannot be used here: {refusal}; use mode {usable} "
            f"({profile.auto_output!r} is the default there)."
        )
    return mode, profile.forces_output_tool(config.extras.get("thinking"))


# --- one structured turn ---------------------------------------------------------------------


class OutputRun:
    """The structured-output state of one turn: how requests are shaped, how
    answers are judged, how many attempts failed."""

    def __init__(self, spec: OutputSpec, schema: OutputSchema, mode: str, force: bool) -> None:
        self.spec = spec
        self.schema = schema
        self.mode = mode
        self.force = force
        self.failures = 0
        self._value: Any = _UNSET
        self._tool_errors: list[str] | None = None
        # Built once: every step of the turn sends the same bytes.
        self._format: FrozenDict | None = None
        self._tool: FrozenDict | None = None

    @classmethod
    def create(cls, output_type: OutputType, config: LlmCallConfig, tools: Toolset) -> OutputRun:
        """Validate ``output_type`` against the agent's config and tools (before
        anything is logged: a bad output type leaves no trace)."""
        spec = output_type if isinstance(output_type, OutputSpec) else OutputSpec(output_type)
        config = complete_config(config)
        mode, force = _resolve(spec, config)
        schema = output_schema(spec.type, name=spec.name, description=spec.description)
        run = cls(spec, schema, mode, force)
        if mode == "tool":
            if OUTPUT_TOOL in tools:
                raise OutputError(
                    f"the toolset has a tool named {OUTPUT_TOOL!r}, the name of the output "
                    "tool; rename that tool to use structured output in tool mode."
                )
            if run.schema.schema.get("type") != "object":
                raise OutputError(
                    'tool mode needs an object schema ({"type": "object", ...}): a tool\'s '
                    "arguments are a JSON object."
                )
        run.extras(config)  # refuses a config that sets the fields already
        return run

    # --- what the requests carry ---------------------------------------------------------

    def _format_field(self, config: LlmCallConfig) -> tuple[str, FrozenDict]:
        """The body field that asks for the format, and its value: ``response_format``
        on chat completions, ``text: {"format": ...}`` (the schema's fields flat)
        on the Responses API."""
        responses = _responses(config)
        if self._format is None:
            fmt: dict[str, Any] = {"type": "json_object"}
            if self.mode == "json_schema":
                schema = self.schema
                body: dict[str, Any] = {"name": schema.name}
                if schema.description:
                    body["description"] = schema.description
                body["schema"] = schema.schema
                strict = self.spec.strict
                body["strict"] = strict_default(schema.schema) if strict is None else strict
                fmt = (
                    {"type": "json_schema", **body}
                    if responses
                    else {"type": "json_schema", "json_schema": body}
                )
            self._format = freeze({"format": fmt} if responses else fmt, path="response_format")
        return ("text" if responses else "response_format"), self._format

    def _tool_choice(self, config: LlmCallConfig, others: bool) -> Any:
        if _anthropic(config):
            return {"type": "any"} if others else {"type": "tool", "name": OUTPUT_TOOL}
        if _responses(config):
            return "required" if others else {"type": "function", "name": OUTPUT_TOOL}
        return "required" if others else {"type": "function", "function": {"name": OUTPUT_TOOL}}

    def extras(self, config: LlmCallConfig, *, others: bool = False) -> dict[str, Any]:
        """The body fields this turn adds to ``config.extras``."""
        if self.mode in ("json_schema", "json_object"):
            key, value = self._format_field(config)
            added = {key: value}
        elif self.mode == "tool" and self.force:
            added = {"tool_choice": self._tool_choice(config, others)}
        else:
            added = {}
        taken = [k for k in added if k in config.extras]
        if taken:
            raise OutputError(
                f"config.extras sets {taken[0]!r}, which structured output sets itself; "
                "remove it from the config for this agent."
            )
        return added

    def tool_schema(self) -> FrozenDict:
        """The output tool's neutral schema: the output schema as its parameters."""
        if self._tool is None:
            description = self.schema.description or "Give your final answer as the arguments."
            self._tool = freeze(
                {"name": OUTPUT_TOOL, "description": description, "parameters": self.schema.schema}
            )
        return self._tool

    def shape(self, config: LlmCallConfig, tools: list[Any]) -> tuple[LlmCallConfig, list[Any]]:
        """The step's config and tools with this turn's output fields added."""
        if self.mode == "tool":
            tools = _insert(tools, self.tool_schema())
        added = self.extras(config, others=len(tools) > 1)
        if added:
            config = config.replace(extras={**config.extras, **added})
        return config, tools

    def instructions(self) -> str | None:
        """The model-visible instruction this mode needs (``None``: the body says it all)."""
        if self.mode in ("json_object", "prompted"):
            return (
                "Reply to this message with only a json object (no other text, no code fence) "
                f"that matches this JSON schema:\n{encode_str(self.schema.schema)}"
            )
        if self.mode == "tool" and not self.force:
            return (
                f"When you have the answer, call the {OUTPUT_TOOL} tool with it as the "
                "arguments; do not answer in text."
            )
        return None

    def begin(self, session: Session) -> None:
        """Log the instruction, if the mode needs one (right after the prompt)."""
        text = self.instructions()
        if text is not None:
            _context(session, text, "output-instructions")

    # --- judging the answers ---------------------------------------------------------------

    def toolset(self, tools: Toolset) -> Toolset:
        """The agent's tools plus the output tool (tool mode), for running a step's calls."""
        return _OutputTools(tools, self) if self.mode == "tool" else tools

    def accept(self, arguments: str) -> ToolOutcome:
        """The output tool's call: ``accepted``, or an error result naming what is wrong."""
        if self._value is not _UNSET:
            return ToolOutcome(content="ignored: an answer was already accepted")
        value, errors = self.schema.check(arguments.strip() or "{}")
        if not errors:
            self._value = value
            self._tool_errors = None
            return ToolOutcome(content=_ACCEPTED)
        self._tool_errors = errors
        listed = "; ".join(errors)
        return ToolOutcome(
            content=(
                f"invalid arguments for {OUTPUT_TOOL}: {listed}. Call {OUTPUT_TOOL} again "
                "with arguments that match its schema."
            ),
            is_error=True,
            error={"kind": "invalid_output", "type": "ValidationError", "message": listed},
        )

    def after_step(
        self,
        session: Session,
        outcome: Outcome,
        message: Event,
        reason: Mapping[str, Any] | None,
    ) -> Mapping[str, Any] | None:
        """How the turn goes on after a step (``None``: another step).

        ``reason`` is what the step would end the turn with without structured
        output; a step that stopped for ``max_tokens`` or an error ends it as
        it would have.
        """
        if reason is not None and reason["kind"] != "completed":
            return reason
        if self.mode == "tool":
            if self._value is not _UNSET:
                outcome.output = self._value
                return {"kind": "completed"}
            if self._tool_errors is not None:
                errors, self._tool_errors = self._tool_errors, None
                # The error tool/result is the model-visible retry message.
                return self._failed(session, errors, retry=None)
            if reason is None:
                return None  # other tools ran: the model goes on
            retry = f"Call the {OUTPUT_TOOL} tool with your answer as its arguments."
            return self._failed(session, [f"no call of the {OUTPUT_TOOL} tool"], retry=retry)
        if reason is None:
            return None
        value, errors = self.schema.check(unfenced(final_text(message.data["content"])))
        if not errors:
            outcome.output = value
            return reason
        listed = "; ".join(errors)
        retry = (
            f"Your answer is not a valid {self.schema.name}: {listed}. Reply again with only "
            "a json object that matches the schema."
        )
        return self._failed(session, errors, retry=retry)

    def _failed(
        self, session: Session, errors: list[str], *, retry: str | None
    ) -> Mapping[str, Any] | None:
        self.failures += 1
        if self.failures > self.spec.retries:
            attempts = self.failures
            noun = "answer" if attempts == 1 else "answers"
            message = (
                f"the model's {noun} did not match the output schema {self.schema.name} "
                f"({attempts} {noun}, {self.spec.retries} retries): {'; '.join(errors)}"
            )
            return {"kind": "error", "error": {"type": "OutputValidationError", "message": message}}
        if retry is not None:
            _context(session, retry, "output-validation")
        return None


class _OutputTools(Toolset):
    """The agent's toolset, with the output tool's calls answered by the turn."""

    def __init__(self, inner: Toolset, run: OutputRun) -> None:
        super().__init__()
        self._inner = inner
        self._run = run

    async def run(self, name: str, arguments: str) -> ToolOutcome:
        if name == OUTPUT_TOOL:
            return self._run.accept(arguments)
        return await self._inner.run(name, arguments)


def _context(session: Session, text: str, kind: str) -> None:
    session.append(
        "context/message",
        {"content": text_blocks(text), "source": {"kind": kind}},
        surface_op="append",
    )


def _insert(tools: list[Any], schema: Mapping[str, Any]) -> list[Any]:
    """``schema`` placed as a header delta's ``add`` places it (before the first tool
    whose name sorts after its own), so adding it is a delta, not a new snapshot."""
    name = schema["name"]
    at = next((i for i, t in enumerate(tools) if t["name"] > name), len(tools))
    return [*tools[:at], schema, *tools[at:]]


def shape_request(
    run: OutputRun | None,
    config: LlmCallConfig,
    tools: list[Any],
    folded: EpochHeader | None,
) -> tuple[LlmCallConfig, list[Any]]:
    """A step's config and tools, shaped for structured output (pure).

    ``run`` is the turn's structured output (``None`` on a plain turn),
    ``config`` the step's config after the ``request`` hook and ``tools`` the
    agent's schemas; ``folded`` is the header in force (the log's fold).

    Once the header holds the output tool, two facts of the wire's profile
    can keep it there on later turns (``tapelog.cache.WIRE_PROFILES``):

    * ``sticky_output_tool`` (Anthropic): the tool stays for the session, in
      the place its ``add`` gave it, so a plain turn after a structured one
      changes only ``tool_choice``, not the tool list (a tool list change
      invalidates the whole cached prefix, system prompt included);
    * ``tool_history_needs_tools``: the API refuses a request whose history
      holds tool calls but that defines no tools, so a step that would carry
      none keeps the output tool.

    A kept output tool that is the step's only tool gets ``tool_choice:
    {"type": "none"}`` so it cannot be called.
    """
    if run is not None:
        config, tools = run.shape(config, tools)
    if folded is None or any(t["name"] == OUTPUT_TOOL for t in tools):
        return config, tools
    kept = next((t for t in folded.tools if t["name"] == OUTPUT_TOOL), None)
    if kept is None:
        return config, tools
    profile = wire_profile(config)
    if not profile.sticky_output_tool and (tools or not profile.tool_history_needs_tools):
        return config, tools
    tools = _insert(tools, kept)
    if len(tools) == 1 and "tool_choice" not in config.extras:
        config = config.replace(extras={**config.extras, "tool_choice": {"type": "none"}})
    return config, tools


def output_toolset(run: OutputRun | None, tools: Toolset) -> Toolset:
    """The toolset that runs a step's calls: the structured turn's (its output
    tool answered by the turn), or on a plain turn the agent's, with a call of
    an output tool the header kept (sticky) answered by an error the model can
    act on."""
    if run is not None:
        return run.toolset(tools)
    return tools if OUTPUT_TOOL in tools else _PlainTurnTools(tools)


class _PlainTurnTools(Toolset):
    """A plain turn's tools: the output tool may still be in the header, but no
    structured answer is asked for."""

    def __init__(self, inner: Toolset) -> None:
        super().__init__()
        self._inner = inner

    async def run(self, name: str, arguments: str) -> ToolOutcome:
        if name != OUTPUT_TOOL:
            return await self._inner.run(name, arguments)
        message = (
            f"no structured answer is asked for in this turn, so {OUTPUT_TOOL} does "
            "nothing now; answer in text or with your other tools."
        )
        return ToolOutcome(
            content=message,
            is_error=True,
            error={"kind": "unknown_tool", "type": "ToolError", "message": message},
        )
