"""A turn run at most once per idempotency key, whatever runs it how often.

A durable queue runs a turn *at least* once: a worker killed mid-turn has the
turn run again by another. The log makes that exactly once. The prompt's
``user/message`` carries the turn's key (``idempotency_key``, docs/format.md),
so whoever runs the turn again first reads the log:

* no prompt with the key: it was never durably appended; append it (with the
  key) and run the turn;
* the prompt's turn, and the turns after it that have no prompt of their own
  (continuations), last ended ``interrupted``: a worker died in it, and repair
  (on opening the session) closed the interrupted step as the log says (a tool
  call logged without a result got an error result; it is not run again).
  The turn goes on from the log: a turn with no new prompt
  (:meth:`~tapelog.agent.Agent.continue_turn`), where the model decides;
* it ended any other way: it is done; its outcome is read from the log and
  nothing is sent.

The turns of one session must run one after the other (the queue sees to it:
one turn per session at a time), so the turns after the prompt's and before
the next prompt are this key's continuations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tapelog.agent import Agent
from tapelog.log._api import Session

__all__ = ["KeyedTurn", "find_keyed_turn", "run_keyed_turn"]


@dataclass(frozen=True)
class KeyedTurn:
    """What the log holds of the turn keyed ``key``: its prompt's turn number, the
    last turn that continued it, how that one ended (``None``: still open) and
    the text of the last answer."""

    key: str
    turn: int
    last: int
    reason: Mapping[str, Any] | None
    text: str

    @property
    def interrupted(self) -> bool:
        return self.reason is None or self.reason.get("kind") == "interrupted"

    def to_json(self, *, ran: str) -> dict[str, Any]:
        """The outcome a queue records (``ran``: ``new``, ``continued`` or ``done``)."""
        return {
            "key": self.key,
            "turn": self.turn,
            "last_turn": self.last,
            "reason": dict(self.reason) if self.reason is not None else None,
            "text": self.text,
            "ran": ran,
        }


@dataclass
class _Turn:
    number: int
    key: str | None = None
    prompted: bool = False
    reason: Mapping[str, Any] | None = None
    text: str = ""


def _turns(session: Session) -> list[_Turn]:
    """Every turn of the log, in order, with what :func:`find_keyed_turn` reads."""
    turns: list[_Turn] = []
    for event in session.events:
        data = event.data
        if event.type == "turn/start":
            turns.append(_Turn(data["turn"]))
        elif not turns:
            continue
        elif _is_prompt(event.type, data) and not turns[-1].prompted:
            turns[-1].prompted = True
            turns[-1].key = data.get("idempotency_key")
        elif event.type == "turn/end" and data["turn"] == turns[-1].number:
            turns[-1].reason = data["reason"]
        elif event.type == "assistant/message":
            text = "".join(b["text"] for b in data["content"] if b["type"] == "text")
            turns[-1].text = text or turns[-1].text
    return turns


def _is_prompt(etype: str, data: Mapping[str, Any]) -> bool:
    """A turn's prompt: a user's ``user/message`` (a compaction's summary, also a
    ``user/message``, may open a continuation without making it a new turn)."""
    return etype == "user/message" and data["source"].get("kind") == "user"


def find_keyed_turn(session: Session, key: str) -> KeyedTurn | None:
    """The turn whose prompt carries ``key``, with its continuations (module docstring)."""
    turns = _turns(session)
    first = next((k for k, t in enumerate(turns) if t.key == key), None)
    if first is None:
        return None
    chain = [turns[first]]
    for turn in turns[first + 1 :]:
        if turn.prompted:
            break
        chain.append(turn)
    text = next((t.text for t in reversed(chain) if t.text), "")
    return KeyedTurn(key, chain[0].number, chain[-1].number, chain[-1].reason, text)


async def run_keyed_turn(agent: Agent, prompt: str, key: str) -> dict[str, Any]:
    """Run, go on with, or only report the turn keyed ``key`` on the agent's
    session (module docstring); its outcome, as :meth:`KeyedTurn.to_json`.

    Make the agent after opening the session: making it repairs what a crash
    left open, which is what tells an interrupted turn from a finished one.
    """
    found = find_keyed_turn(agent.session, key)
    if found is None:
        ran, result = "new", await agent.run(prompt, idempotency_key=key)
    elif found.interrupted:
        ran, result = "continued", await agent.continue_turn()
    else:
        return found.to_json(ran="done")
    first = found.turn if found is not None else result.turn
    done = KeyedTurn(key, first, result.turn, result.reason, result.text)
    return done.to_json(ran=ran)
