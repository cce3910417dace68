"""What each wire can do: one typed profile per wire family or dialect.

Facts about a provider's wire that more than one part of tapelog acts on live
here, once: the agent loop reads them to choose how to ask for structured
output, the emulator to refuse what the provider refuses, with the provider's
own message, and the docs' table (docs/providers.md, "Wire profiles") is
checked against them by a test. Change a fact here and the loop and the
emulator move together.

A profile is chosen by the wire identity a logged config implies (family,
dialect) and, for the in-process emulator provider, by its name (its default
endpoint is DeepSeek-flavoured but its models do not think; docs/emulator.md).
The module is pure and sits below the wires, next to the providers'
documented cache rules, because the emulator may import only ``log`` and
``cache`` (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal

__all__ = [
    "OUTPUT_MODES",
    "WIRE_PROFILES",
    "OutputModeName",
    "ReasoningSendBack",
    "WireFamily",
    "WireProfile",
    "profile_for",
    "wire_profile_named",
]

OutputModeName = Literal["json_schema", "json_object", "tool", "prompted"]
"""How a structured turn asks for its schema (docs/providers.md, "Structured output")."""

OUTPUT_MODES: Final[tuple[OutputModeName, ...]] = ("json_schema", "json_object", "tool", "prompted")

WireFamily = Literal["openai", "anthropic", "local"]

ReasoningSendBack = Literal["never", "present", "tool_turns", "present_and_tool_turns"]
"""When logged reasoning goes back as ``reasoning_content`` on assistant messages
of the OpenAI-compatible wire (docs/providers.md, "DeepSeek: sending reasoning back").

``never``: not sent. ``present``: on every assistant message that has
reasoning. ``tool_turns``: on every assistant message with tool calls (an empty
string when none was logged), and nowhere else. ``present_and_tool_turns``:
both -- every message with reasoning, and every message with tool calls
(``""`` when none was logged).
"""

_NO_FORMATS: Final[Mapping[str, str]] = MappingProxyType({})
_NO_MODELS: Final[Mapping[str, ReasoningSendBack]] = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class WireProfile:
    """What one wire (a family, or an OpenAI-compatible dialect) can do.

    ``auto_output`` is the structured-output mode ``mode="auto"`` picks: the
    one the provider enforces best. ``response_format`` says the body has
    OpenAI's ``response_format`` field at all; ``refused_formats`` maps a
    ``response_format`` type the provider answers with a 400 to that answer's
    message. ``json_word_required``: a ``json_object`` format needs the word
    "json" in the system or user prompt. ``thinks_by_default``: the provider's
    models think unless ``config.extras`` says ``{"thinking": {"type":
    "disabled"}}``; ``thinking_refuses_forced_tool``: with thinking on, a
    ``tool_choice`` that forces a tool is refused. ``tool_history_needs_tools``:
    a request whose history holds tool calls must define tools.
    ``sticky_output_tool``: once a structured turn has put the output tool
    into the header, it stays there for the session and only ``tool_choice``
    changes between turns (a tool list change breaks the whole cached prefix).
    ``reasoning_send_back`` is the OpenAI-compatible wire's default rule for
    sending logged reasoning back, ``model_reasoning_send_back`` the models
    whose rule differs (the agent's wire and the proxy both use
    :meth:`send_back_for`; the Anthropic wire always returns thinking blocks).
    """

    name: str
    family: WireFamily
    auto_output: OutputModeName
    response_format: bool
    refused_formats: Mapping[str, str] = field(default_factory=lambda: _NO_FORMATS)
    json_word_required: bool = False
    thinks_by_default: bool = False
    thinking_refuses_forced_tool: bool = True
    tool_history_needs_tools: bool = False
    sticky_output_tool: bool = False
    reasoning_send_back: ReasoningSendBack = "never"
    model_reasoning_send_back: Mapping[str, ReasoningSendBack] = field(
        default_factory=lambda: _NO_MODELS
    )
    source: str = ""

    def send_back_for(self, model: str) -> ReasoningSendBack:
        """The reasoning send-back rule for ``model`` on this wire."""
        return self.model_reasoning_send_back.get(model, self.reasoning_send_back)

    def output_refusal(self, mode: str) -> str | None:
        """Why structured-output ``mode`` cannot be used on this wire (``None``: it can)."""
        if mode not in ("json_schema", "json_object"):
            return None
        if not self.response_format:
            return f"the {self.name} wire has no response_format (an OpenAI-compatible body field)"
        refused = self.refused_formats.get(mode)
        if refused is not None:
            return f"{self.name} answers 400 to response_format {mode} ({refused!r})"
        return None

    def output_modes(self) -> tuple[OutputModeName, ...]:
        """The structured-output modes this wire takes, the ``auto`` choice first."""
        usable = [m for m in OUTPUT_MODES if self.output_refusal(m) is None]
        usable.remove(self.auto_output)
        return (self.auto_output, *usable)

    def thinking(self, flag: object) -> bool:
        """Whether a request thinks, given its ``thinking`` extras value (``None``: not set)."""
        if not isinstance(flag, Mapping) or "type" not in flag:
            return self.thinks_by_default
        return bool(flag["type"] != "disabled")

    def forces_output_tool(self, flag: object) -> bool:
        """Whether tool mode may force the output tool (``tool_choice``), given the
        request's ``thinking`` extras value."""
        return not (self.thinking_refuses_forced_tool and self.thinking(flag))


_DEEPSEEK_NO_SCHEMA: Final = "This response_format type is unavailable now"

WIRE_PROFILES: Final[Mapping[str, WireProfile]] = MappingProxyType(
    {
        profile.name: profile
        for profile in (
            WireProfile(
                name="anthropic",
                family="anthropic",
                auto_output="tool",
                response_format=False,
                tool_history_needs_tools=True,
                sticky_output_tool=True,
                source="docs/providers.md#structured-output (forced tool; extended thinking)",
            ),
            WireProfile(
                name="openai",
                family="openai",
                auto_output="json_schema",
                response_format=True,
                source="docs/providers.md#structured-output (Structured Outputs)",
            ),
            WireProfile(
                name="deepseek",
                family="openai",
                auto_output="json_object",
                response_format=True,
                refused_formats=MappingProxyType({"json_schema": _DEEPSEEK_NO_SCHEMA}),
                json_word_required=True,
                thinks_by_default=True,
                # Thinking mode (on by default since V4) needs reasoning_content back on
                # tool-call turns and ignores it elsewhere; the field must be present on
                # a tool-call turn even when no reasoning was logged (docs/providers.md,
                # "DeepSeek: sending reasoning back"). No model differs: the R1-era
                # deepseek-reasoner refused the field, but since V3.2 that name is the
                # thinking mode of the current model.
                reasoning_send_back="present_and_tool_turns",
                source="docs/providers.md#structured-output (JSON Output; V4 thinking mode)",
            ),
            WireProfile(
                name="compatible",
                family="openai",
                auto_output="json_schema",
                response_format=True,
                source="docs/providers.md#structured-output (vLLM, Ollama guided decoding)",
            ),
            WireProfile(
                name="emulator",
                family="openai",
                auto_output="json_object",
                response_format=True,
                source="docs/emulator.md (the /v1 endpoint is DeepSeek-flavoured)",
            ),
            WireProfile(
                name="local",
                family="local",
                auto_output="prompted",
                response_format=True,
                source="docs/providers.md#local (llama.cpp in process reads no response_format)",
            ),
        )
    }
)
"""Every wire's profile, by name: a family (``anthropic``, ``local``), an
OpenAI-compatible dialect, or the ``emulator`` provider."""


def wire_profile_named(name: str) -> WireProfile:
    """The profile called ``name`` (read at call time, so the emulator and the
    loop always see the same table)."""
    return WIRE_PROFILES[name]


def profile_for(provider: str, family: str, dialect: str | None) -> WireProfile:
    """The profile of a config's wire (``family`` and ``dialect`` as
    ``tapelog.llm.wire_identity`` gives them). Never raises: an unknown
    OpenAI-compatible dialect gets the ``compatible`` profile."""
    profiles = WIRE_PROFILES
    if provider == "emulator":
        return profiles["emulator"]
    if family in ("anthropic", "local"):
        return profiles[family]
    return profiles.get(dialect or "compatible", profiles["compatible"])
