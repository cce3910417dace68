"""The rule that tells one agent of a client from another (proxy/_identity.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tapelog.proxy._identity import Agent, Signal, another_agent, client_signal, similar

PROMPT = "\n".join(f"Line {i} of the agent's instructions, kept as written." for i in range(40))


@given(st.integers(0, len(PROMPT)), st.text(max_size=40), st.integers(0, 40))
def test_one_edit_in_one_place_keeps_a_prompt_similar(at: int, text: str, cut: int) -> None:
    edited = PROMPT[:at] + text + PROMPT[at + cut :]
    assert similar(PROMPT, edited)
    assert similar(edited, PROMPT)


def test_edits_on_several_lines_keep_a_prompt_similar() -> None:
    lines = PROMPT.splitlines()
    lines[3] = "Today is 2026-12-02."
    lines[30] = "git status: clean"
    assert similar(PROMPT, "\n".join(lines))


def test_another_agents_prompt_is_not_similar() -> None:
    other = "\n".join(f"Subagent step {i}: extract what is worth remembering." for i in range(20))
    assert not similar(PROMPT, other)
    assert not similar(PROMPT, "")
    assert similar("", "")


MAIN = Agent(PROMPT, frozenset({"read", "write", "shell"}), "m")


def test_the_rule() -> None:
    other = "You are a title generator."
    assert another_agent(MAIN, MAIN, None, None) is None
    # rewritten prompt, same tools and model: the same agent
    assert another_agent(MAIN, Agent(other, MAIN.tools, "m"), None, None) is None
    # a tool added, the prompt edited: the same agent
    plus = Agent(PROMPT + "\nnow", MAIN.tools | {"mcp"}, "m")
    assert another_agent(MAIN, plus, None, None) is None
    assert another_agent(MAIN, Agent(other, frozenset(), "m"), None, None) == (
        "another agent (system prompt and tools differ)"
    )
    assert another_agent(MAIN, Agent(other, MAIN.tools, "small"), None, None) == (
        "another agent (system prompt and model differ)"
    )
    # tool-less agents whose prompts differ are told apart by the prompt alone
    bare = Agent(PROMPT, frozenset(), "m")
    assert another_agent(bare, Agent(other, frozenset(), "m"), None, None) is not None
    one, two = Signal("session_id", "a"), Signal("session_id", "b")
    assert another_agent(MAIN, MAIN, one, one) is None
    assert another_agent(MAIN, MAIN, one, None) is None
    assert another_agent(MAIN, MAIN, one, two) == (
        "another conversation of the client (session_id differs)"
    )


def test_client_signals() -> None:
    uuid = "0d4c3b1a-2f6e-4a8b-9c0d-1e2f3a4b5c6d"
    assert client_signal({}, {"x-claude-code-session-id": uuid}) == Signal(
        "x-claude-code-session-id", uuid
    )
    user_id = f"user_{'ab' * 32}_account_{uuid}_session_{uuid}"
    assert client_signal({"metadata": {"user_id": user_id}}, {}) == Signal("metadata.user_id", uuid)
    as_json = '{"device_id":"d","account_uuid":"","session_id":"' + uuid + '"}'
    assert client_signal({"metadata": {"user_id": as_json}}, {}) == Signal("metadata.user_id", uuid)
    # a user id that names a user, not a conversation, is no signal
    assert client_signal({"metadata": {"user_id": "alice"}}, {}) is None
    assert client_signal({"prompt_cache_key": "k"}, {"session_id": "s"}) == Signal(
        "prompt_cache_key", "k"
    )
    assert client_signal({}, {"session_id": "s"}) == Signal("session_id", "s")
    assert client_signal({}, {"x-codex-window-id": "w"}) == Signal("x-codex-window-id", "w")
    assert client_signal({"prompt_cache_key": ""}, {"session_id": "x" * 500}) is None


def test_a_system_prompt_kept_as_blocks_compares_by_its_text() -> None:
    blocks = [{"type": "text", "text": "You are Claude Code."}, {"type": "text", "text": PROMPT}]
    agent = Agent.of(blocks, [{"name": "read"}], "m")
    assert agent == Agent("You are Claude Code.\n" + PROMPT, frozenset({"read"}), "m")
    assert Agent.of(None, (), "m").system == ""
