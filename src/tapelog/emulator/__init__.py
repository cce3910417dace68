"""Local provider servers with deterministic prompt-cache accounting.

:class:`Emulator` speaks the OpenAI-compatible chat completions wire (DeepSeek
and OpenAI cache rules), the OpenAI Responses API and the Anthropic Messages
wire, answers from a script or a deterministic default policy, and reports
cache usage by each provider's documented rule. The rules themselves live in
:mod:`tapelog.cache` (pure functions over segment lists, shared with the cache
audit). See docs/emulator.md.
"""

from tapelog.emulator._app import Emulator, ReceivedRequest
from tapelog.emulator._script import load_script

__all__ = [
    "Emulator",
    "ReceivedRequest",
    "load_script",
]
