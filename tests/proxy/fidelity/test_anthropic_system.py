"""A system prompt as a list of blocks, kept with every field and marker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._anthropic import body, carry, reply

HELLO = [{"role": "user", "content": "hello"}]
SYSTEM = [
    {"type": "text", "text": "x-billing: cc_version=2.1"},
    {"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral"}},
    {"type": "text", "text": "Rules.", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
]


def _next(system: Any) -> Any:
    def step(answer: Any) -> dict[str, Any]:
        return body([*HELLO, reply(answer), {"role": "user", "content": "more"}], system=system)

    return step


async def test_system_blocks_are_carried_and_a_changed_block_is_named(tmp_path: Path) -> None:
    changed = [*SYSTEM[:2], {**SYSTEM[2], "text": "Rules, changed."}]
    carried = await carry(tmp_path, body(HELLO, system=SYSTEM), _next(changed))
    assert carried.session.header is not None
    assert list(carried.session.header.system or ()) == changed
    assert carried.causes(2) == ["system 1 line"]  # one block changed in place
    (cause,) = carried.report.requests[1].causes
    assert "Rules, changed." in str(cause.detail["system_change"])


async def test_a_moved_system_marker_is_named(tmp_path: Path) -> None:
    moved = [SYSTEM[0], {k: v for k, v in SYSTEM[1].items() if k != "cache_control"}, SYSTEM[2]]
    carried = await carry(tmp_path, body(HELLO, system=SYSTEM), _next(moved))
    # The prompt's tokens are unchanged (no cache cause), but what is cached moved:
    diff = carried.changed(2)["system"]
    assert (
        '-{"type":"text","text":"You are an agent.","cache_control":{"type":"ephemeral"}}' in diff
    )
    assert '+{"type":"text","text":"You are an agent."}' in diff


async def test_a_string_system_prompt_stays_a_string(tmp_path: Path) -> None:
    carried = await carry(tmp_path, body(HELLO, system="Be terse."))
    assert carried.session.header is not None
    assert carried.session.header.system == "Be terse."
