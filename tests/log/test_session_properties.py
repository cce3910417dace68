"""Property tests: the cached projection always equals a fresh fold of the surface.

Random sequences of appends, compaction-style replaces and tool-result trims
run against two sessions; one derives messages between operations and one
does not, so the cache's incremental path and its rebuild path both meet the
reference fold (``fold_messages`` over the surface, and a replayed session).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog.log import encode
from tapelog.log._api import Session
from tapelog.log._projection import fold_messages

from ._strategies import text

_text_block = st.builds(lambda t: {"type": "text", "text": t}, text)
_content = st.lists(_text_block, min_size=1, max_size=2)


def _assistant_content(d: st.DataObject, n: int) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = d.draw(st.lists(_text_block, max_size=2))
    if d.draw(st.booleans()):
        blocks.insert(0, {"type": "reasoning", "text": "hm", "signature": "sig"})
    for k in range(d.draw(st.integers(0, 2))):
        blocks.append({"type": "tool_call", "id": f"c{n}-{k}", "name": "read", "arguments": "{}"})
    return blocks  # may be empty: such a message projects to nothing


def _operation(d: st.DataObject, session: Session, n: int) -> tuple[str, dict[str, Any], Any, Any]:
    """One (type, data, surface_op, source_seqs) that is legal on ``session`` now."""
    surface = session.surface
    tool_nodes = [s for s in surface if session.event(s).type == "tool/result"]
    waiting = [call.call_id for call in session.rules.ledger.open_calls()]
    kinds = ["user", "context", "assistant", "chunk"]
    if waiting:  # a result answers a call that waits for one (the log's rules)
        kinds.append("tool")
    if surface:
        kinds.append("compact")
    if tool_nodes:
        kinds.append("trim")
    kind = d.draw(st.sampled_from(kinds))
    if kind in ("user", "context"):
        etype = "user/message" if kind == "user" else "context/message"
        source = {"kind": "user" if kind == "user" else "inject"}
        return etype, {"content": d.draw(_content), "source": source}, "append", None
    if kind == "assistant":
        data = {
            "turn": 0,
            "step": n,
            "content": _assistant_content(d, n),
            "source": {"provider": "openai", "model": "m"},
        }
        return "assistant/message", data, "append", None
    if kind == "tool":
        content: Any = d.draw(text | _content)
        call_id = d.draw(st.sampled_from(waiting))
        data = {"turn": 0, "step": n, "call_id": call_id, "content": content, "is_error": False}
        return "tool/result", data, "append", None
    if kind == "chunk":
        return "assistant/chunk", {"turn": 0, "step": n, "chunk": {"kind": "text"}}, None, None
    if kind == "compact":
        i = d.draw(st.integers(0, len(surface) - 1))
        j = d.draw(st.integers(i, len(surface) - 1))
        op = {"op": "replace", "start": surface[i], "end": surface[j]}
        etype = d.draw(st.sampled_from(["user/message", "context/message"]))
        data = {"content": d.draw(_content), "source": {"kind": "compaction"}}
        return etype, data, op, surface[i : j + 1]
    seq = d.draw(st.sampled_from(tool_nodes))
    old = dict(session.event(seq).data)
    old["content"] = d.draw(st.sampled_from(["[trimmed]", ""]) | _content)
    return "tool/result", old, {"op": "replace", "start": seq, "end": seq}, None


def _reference(session: Session) -> bytes:
    return encode(fold_messages(session.event(s) for s in session.surface))


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_cached_projection_equals_a_fresh_fold_of_the_surface(data: st.DataObject) -> None:
    clock = iter(range(1_000, 10_000))
    live = Session("s-live", clock=lambda: next(clock))
    quiet_clock = iter(range(1_000, 10_000))
    quiet = Session("s-quiet", clock=lambda: next(quiet_clock))
    for n in range(data.draw(st.integers(1, 25), label="length")):
        etype, payload, op, sources = _operation(data, live, n)
        live.append(etype, payload, surface_op=op, source_seqs=sources)
        quiet.append(etype, payload, surface_op=op, source_seqs=sources)
        if data.draw(st.booleans(), label="derive between"):
            assert encode(live.derive_messages()) == _reference(live)
    expected = _reference(live)
    assert encode(live.derive_messages()) == expected
    assert encode(quiet.derive_messages()) == expected
    replayed = Session.from_events(live.events)
    assert encode(replayed.derive_messages()) == expected
    assert replayed.surface == live.surface
    assert replayed.replace_generation == live.replace_generation
    nodes = live.derive_nodes()
    assert [m for _, m in nodes] == live.derive_messages()
    seqs = [s for s, _ in nodes]
    assert seqs == [s for s in live.surface if s in set(seqs)]
