"""Chat completions content parts carried exactly, whatever their type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ._carry import MODEL, carry, carry_two

TEXT = {"type": "text", "text": "What is this?"}
PARTS: list[tuple[str, dict[str, Any]]] = [
    ("image by URL", {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}),
    ("image as data", {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}),
    (
        "image with detail",
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "low"}},
    ),
    ("input_audio", {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}),
    ("file by id", {"type": "file", "file": {"file_id": "file-abc"}}),
    (
        "file as data",
        {
            "type": "file",
            "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBE"},
        },
    ),
    (
        "a text part with more members",
        {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
    ),
    ("an unknown part", {"type": "video_url", "video_url": {"url": "https://x.test/v.mp4"}}),
]


@pytest.mark.parametrize("part", [p for _, p in PARTS], ids=[n for n, _ in PARTS])
async def test_a_content_part_is_carried_as_sent(tmp_path: Path, part: dict[str, Any]) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": [TEXT, part]}]}
    await carry(tmp_path, [body])


async def test_parts_in_developer_and_assistant_messages_are_carried(tmp_path: Path) -> None:
    audio = PARTS[3][1]
    messages = [
        {"role": "developer", "content": [TEXT, {"type": "text", "text": "more"}]},
        {"role": "user", "content": [audio]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "a"}, {"type": "refusal", "refusal": "b"}],
        },
        {"role": "user", "content": "go on"},
    ]
    await carry(tmp_path, [{"model": MODEL, "messages": messages}])


async def test_a_changed_part_is_named_by_the_audit(tmp_path: Path) -> None:
    image = PARTS[2][1]
    first = {"model": MODEL, "messages": [{"role": "user", "content": [TEXT, image]}]}

    def sharper(body: dict[str, Any]) -> dict[str, Any]:
        high = {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "high"}}
        return {
            **body,
            "messages": [{"role": "user", "content": [TEXT, high]}, *body["messages"][1:]],
        }

    run = await carry_two(tmp_path, first, sharper)
    (cause,) = run.causes(2)
    assert cause["kind"] == "client-edit"
    assert cause["detail"]["message"] == 1
