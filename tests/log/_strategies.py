"""Hypothesis strategies for the session-log tests: JSON values, headers, sessions.

Names, lines and keys come from small vocabularies on purpose: collisions are
what exercise the interesting paths (common system-prompt lines, tools added,
removed and changed under the same name, replaced surface ranges).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tapelog.log._api import EpochHeader, LlmCallConfig

# Any Unicode text that is valid UTF-8 (lone surrogates are refused by design).
text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)

json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=20,
)

json_objects = st.dictionaries(text, json_values, max_size=5)


# --- headers -----------------------------------------------------------------

_LINES = ("You are a helpful agent.", "", "## Tools", "Be brief.", "cwd: /tmp", "  indented")
line = st.sampled_from(_LINES) | st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\n"), max_size=8
)
text_prompts = st.lists(line, min_size=1, max_size=6).map("\n".join)
# A client's Anthropic system prompt: blocks, some with cache markers.
system_block = st.fixed_dictionaries(
    {"type": st.just("text"), "text": line},
    optional={
        "cache_control": st.sampled_from(
            [{"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}]
        )
    },
)
block_prompts = st.lists(system_block, min_size=1, max_size=5)
system_prompts = st.none() | text_prompts | block_prompts

TOOL_NAMES = ("bash", "edit", "glob", "grep", "read", "write")


@st.composite
def shuffled_object(draw: st.DrawFn, fields: dict[str, Any]) -> dict[str, Any]:
    """The same fields in a random key order (key order is part of the bytes)."""
    order = draw(st.permutations(list(fields)))
    return {k: fields[k] for k in order}


_schema_leaf = st.fixed_dictionaries({"type": st.sampled_from(["string", "integer", "boolean"])})
schemas = st.recursive(
    _schema_leaf,
    lambda inner: st.dictionaries(
        st.sampled_from(["path", "limit", "opts", "mode", "x"]), inner, min_size=1, max_size=3
    ).flatmap(lambda props: shuffled_object({"type": "object", "properties": props})),
    max_leaves=6,
)


@st.composite
def tools(draw: st.DrawFn, name: str | None = None) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "name": name or draw(st.sampled_from(TOOL_NAMES)),
        "description": draw(st.sampled_from(["Run it.", "Read a file.", "Edit.\nCarefully."])),
        "parameters": draw(schemas),
    }
    return draw(shuffled_object(fields))


tool_lists = st.lists(tools(), max_size=5, unique_by=lambda t: t["name"])

configs = st.builds(
    LlmCallConfig,
    provider=st.sampled_from(["openai", "anthropic", "deepseek"]),
    model=st.sampled_from(["m-small", "m-large"]),
    max_tokens=st.none() | st.integers(1, 8192),
    temperature=st.none() | st.floats(0, 2, allow_nan=False),
    top_p=st.none() | st.floats(0, 1, allow_nan=False),
    seed=st.none() | st.integers(0, 2**31),
    stop=st.lists(st.sampled_from(["\n\n", "END", "###"]), max_size=2).map(tuple),
    reasoning_effort=st.none() | st.sampled_from(["low", "high"]),
    extras=st.dictionaries(st.sampled_from(["thinking", "user", "n"]), json_values, max_size=2),
    headers=st.dictionaries(
        st.sampled_from(["anthropic-beta", "anthropic-version", "openai-beta"]),
        st.sampled_from(["a-2025-01-01", "a-2025-01-01,b-2026-02-02", "2023-06-01"]),
        max_size=2,
    ),
)

prefix_messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant"]),
            "content": st.lists(
                st.fixed_dictionaries({"type": st.just("text"), "text": text}), max_size=2
            ),
        }
    ),
    max_size=2,
)


@st.composite
def headers(draw: st.DrawFn) -> EpochHeader:
    return EpochHeader(
        config=draw(configs),
        system=draw(system_prompts),
        tools=draw(tool_lists),
        prefix=draw(prefix_messages),
    )


@st.composite
def edited_system(draw: st.DrawFn, old: Any) -> Any:
    """``old`` with a few lines (or blocks) inserted, deleted or replaced (or a new prompt)."""
    if draw(st.booleans()):
        return old
    if old is None or draw(st.integers(0, 4)) == 0:
        return draw(system_prompts)
    blocks = not isinstance(old, str)
    lines: list[Any] = list(old) if blocks else old.split("\n")
    item = system_block if blocks else line
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(lines)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        if action == "insert":
            lines.insert(at, draw(item))
        elif lines and at < len(lines):
            if action == "delete":
                del lines[at]
            else:
                lines[at] = draw(item)
    if blocks:
        return lines or None
    return "\n".join(lines) or None


@st.composite
def edited_tools(draw: st.DrawFn, old: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Remove, change, add and possibly reorder tools; sometimes keep them sorted."""
    out = [t for t in old if draw(st.integers(0, 3)) > 0]
    out = [draw(tools(t["name"])) if draw(st.integers(0, 3)) == 0 else t for t in out]
    present = {t["name"] for t in out}
    for name in TOOL_NAMES:
        if name not in present and draw(st.integers(0, 4)) == 0:
            out.append(draw(tools(name)))
    order = draw(st.sampled_from(["sorted", "kept", "shuffled"]))
    if order == "sorted":
        out.sort(key=lambda t: t["name"])
    elif order == "shuffled":
        out = draw(st.permutations(out))
    return out


@st.composite
def header_edits(draw: st.DrawFn, old: EpochHeader) -> EpochHeader:
    """A header that differs from ``old`` the way a loop's next step might."""
    return EpochHeader(
        config=draw(configs) if draw(st.integers(0, 3)) == 0 else old.config,
        system=draw(edited_system(old.system)),
        tools=draw(edited_tools([dict(t) for t in old.tools])),
        prefix=draw(prefix_messages) if draw(st.integers(0, 4)) == 0 else old.prefix,
    )


@st.composite
def header_pairs(draw: st.DrawFn) -> tuple[EpochHeader, EpochHeader]:
    a = draw(headers())
    b = draw(headers()) if draw(st.integers(0, 5)) == 0 else draw(header_edits(a))
    return a, b


@st.composite
def header_sequences(draw: st.DrawFn) -> list[EpochHeader]:
    first = draw(headers())
    out = [first]
    for _ in range(draw(st.integers(0, 5))):
        out.append(draw(header_edits(out[-1])))
    return out
