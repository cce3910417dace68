"""The checkpoint's state keeps each prefix key once (a shared key table), and a
checkpoint of the format before it (version 3: every key list spelled out) is
ignored and rebuilt."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from audit._growing import AuditCounter, Growing, TurnPlan, grow
from tapelog.audit._audit_state import AuditState
from tapelog.cli import cli
from tapelog.log import decode, encode


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), obj={"debug": False})
    assert result.exit_code == 0, result.output
    return result.stdout


def _v3_state(state: AuditState) -> dict[str, Any]:
    """The state as version 3 wrote it: each rule's keys, and the chain's, in full."""
    chain = state.chain
    return {
        "requests": state.requests,
        "stores": {rule: list(keys) for rule, keys in state.stores.items()},
        "seen": {rule: sorted(keys) for rule, keys in state.seen.items()},
        "chain": chain,
    }


@pytest.fixture
def audited(tmp_path: Path) -> tuple[Path, str, Path]:
    root = tmp_path / "store"
    growing = Growing(root)
    grow(growing, [TurnPlan(rounds=3), TurnPlan(rounds=1, low_usage=True), TurnPlan(rounds=2)])
    growing.close()
    _run("cache", growing.sid, "--store", str(root), "--json")
    return root, growing.sid, growing.path.with_suffix(".audit")


def test_the_state_names_each_prefix_key_once(audited: tuple[Path, str, Path]) -> None:
    _, _, checkpoint = audited
    head, _, state_line, _ = checkpoint.read_bytes().split(b"\n")
    assert decode(head)["version"] == 4
    obj = decode(state_line)
    state = AuditState.from_json(obj)
    every = {k for keys in (*state.stores.values(), *state.seen.values()) for k in keys}
    every |= set(state.chain["keys"] if state.chain else ())
    assert len(every) > 10
    assert len(base64.b64decode(obj["keys"])) == 32 * len(every)  # each key once
    assert AuditState.from_json(decode(encode(state.to_json()))) == state
    # What version 3 spelled out (every key of every list) is at least twice as long.
    assert 2 * len(state_line) < len(encode(_v3_state(state)))


def test_a_version_3_checkpoint_is_ignored_and_rebuilt(
    audited: tuple[Path, str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, sid, checkpoint = audited
    written = checkpoint.read_bytes()
    head_line, rows_line, state_line, _ = written.split(b"\n")
    head = decode(head_line)
    old_state = encode(_v3_state(AuditState.from_json(decode(state_line))))
    head = {**head, "version": 3, "state_sha256": hashlib.sha256(old_state).hexdigest()}
    checkpoint.write_bytes(b"\n".join([encode(head), rows_line, old_state, b""]))
    counted = AuditCounter(monkeypatch)
    out = _run("cache", sid, "--store", str(root), "--json")
    assert counted.count == len(decode(out)["requests"]) > 0  # audited from the start
    assert checkpoint.read_bytes() == written  # and kept as version 4


_KEY = st.binary(min_size=32, max_size=32).map(bytes.hex)


@settings(max_examples=60, deadline=None)
@given(
    stores=st.lists(_KEY, unique=True, max_size=30),
    seen=st.sets(_KEY, max_size=30),
    chain=st.none() | st.lists(_KEY, max_size=30),
    requests=st.integers(0, 10**6),
)
def test_the_key_table_round_trips(
    stores: list[str], seen: set[str], chain: list[str] | None, requests: int
) -> None:
    chained = None if chain is None else {"count": len(chain), "keys": chain, "tokens": []}
    sent = {"openai": tuple(sorted(seen))}
    state = AuditState(requests, {"deepseek": tuple(stores)}, sent, chained)
    back = AuditState.from_json(decode(encode(state.to_json())))
    assert back.stores == state.stores
    assert {r: set(k) for r, k in back.seen.items()} == {"openai": seen}
    assert back.chain == state.chain


@pytest.mark.parametrize(
    "keys",
    ["not base64!", "QUJD", 7],
)
def test_a_damaged_key_table_is_refused(keys: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        AuditState.from_json({"requests": 1, "keys": keys, "stores": {}, "seen": {}, "chain": None})


def test_a_run_past_the_table_is_refused() -> None:
    obj = AuditState(1, {"deepseek": ("ab" * 32,)}, {}, None).to_json()
    obj["stores"]["deepseek"] = [[0, 2]]
    with pytest.raises(ValueError, match="past"):
        AuditState.from_json(obj)
