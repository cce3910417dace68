"""Cache markers stay where the client put them, and a moved one is named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._anthropic import body, carry, reply

ONE_HOUR = {"type": "ephemeral", "ttl": "1h"}


def _marked(text: str, mark: dict[str, Any] | None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if mark is not None:
        block["cache_control"] = mark
    return {"role": "user", "content": [block]}


async def test_a_marker_that_moves_with_the_last_message_is_carried_and_named(
    tmp_path: Path,
) -> None:
    # As Claude Code does: the marker is on the last message of each request.
    def then(answer: Any) -> dict[str, Any]:
        moved = [_marked("first", None), reply(answer), _marked("second", ONE_HOUR)]
        return body(moved)

    carried = await carry(tmp_path, body([_marked("first", ONE_HOUR)]), then)
    upstream = carried.emulator.received
    assert b'"ttl":"1h"' in upstream[0].body
    assert b'"ttl":"1h"' in upstream[1].body
    assert upstream[1].body.count(b"cache_control") == 1  # none added by the wire
    (cause,) = carried.report.requests[1].causes
    assert cause.kind == "client-edit"
    assert cause.detail["field"] == "content[0].extra"
    assert "cache_control" in cause.detail["old"]
