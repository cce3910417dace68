"""``tapelog cache --family``: the cache bottom line of every conversation of one client run.

A client run through the proxy may be several sessions: the main agent's, and
the ones its subagents and side calls branched off (docs/proxy.md, "Another
agent of the same client"), or forks. Each conversation pays for its own
prefix, so the audit of a family is one line per member (what it sent, what
the provider cached, what it paid at full price, and why) and their total.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text

from tapelog.audit import CacheReport, cache_report
from tapelog.cli._terminal import terminal_text
from tapelog.log._api import Session
from tapelog.store import SessionStore
from tapelog.store._api import in_families

__all__ = ["Member", "family_json", "family_members", "family_table"]


@dataclass(frozen=True, slots=True)
class Member:
    """One session of a family, its depth under the root, and its cache audit."""

    depth: int
    session: Session
    report: CacheReport

    @property
    def full_price(self) -> int:
        """Prompt tokens the provider did not report as cached."""
        totals = self.report.totals
        return max(totals.prompt_tokens - totals.cached_reported, 0)

    def why(self) -> str:
        """Why it paid full price: how the conversation started, then each named drop."""
        events = self.session.events
        info = self.session.info
        if len(events) and events[0].type == "session/origin" and "parent" in events[0].data:
            start = f"{events[0].data.get('why', 'branched')}: cold start"
        elif info.parent is not None:  # its seed is the parent's prefix: it may read it
            start = "forked"
        else:
            start = "main conversation: cold start"
        labels: dict[str, None] = {}
        for row in self.report.requests:
            for cause in row.causes:
                labels[cause.label] = None
        return "; ".join([start, *labels])


def family_members(store: SessionStore, session_id: str) -> list[Member]:
    """Every session of ``session_id``'s family (its root, found by its parents,
    and every session under it), each with its cache audit, root first."""
    summaries = [s for s in store.list() if s.error is None]
    parents = {s.id: s.parent for s in summaries}
    root, seen = session_id, {session_id}
    while (parent := parents.get(root)) is not None and parent in parents and parent not in seen:
        seen.add(parent)
        root = parent
    members: list[Member] = []
    inside: set[str] = set()
    for depth, summary in in_families(summaries, lambda s: s.id, lambda s: s.parent):
        if summary.id == root:
            inside.add(root)
        elif depth == 0 or summary.parent not in inside:
            continue
        else:
            inside.add(summary.id)
        session = store.load(summary.id).session
        members.append(Member(depth, session, cache_report(session)))
    return members


def _totals(members: list[Member]) -> dict[str, int]:
    return {
        "requests": sum(m.report.totals.requests for m in members),
        "prompt_tokens": sum(m.report.totals.prompt_tokens for m in members),
        "cached_reported": sum(m.report.totals.cached_reported for m in members),
        "cached_expected": sum(m.report.totals.cached_expected for m in members),
        "full_price_tokens": sum(m.full_price for m in members),
    }


def family_json(members: list[Member]) -> dict[str, Any]:
    """The stable JSON of ``tapelog cache --family --json`` (docs/cli.md)."""
    return {
        "members": [
            {
                "session": m.session.id,
                "parent": m.session.info.parent,
                "depth": m.depth,
                "totals": m.report.totals.to_json(),
                "full_price_tokens": m.full_price,
                "why": m.why(),
            }
            for m in members
        ],
        "totals": _totals(members),
    }


def family_table(members: list[Member]) -> Table:
    """One row per member, indented under its parent, and the family's total."""
    total = _totals(members)
    table = Table(
        title=f"cache audit of the family of {members[0].session.id}",
        caption=(
            f"{len(members)} session(s) · {total['requests']} request(s) · prompt "
            f"{total['prompt_tokens']:,} tok · cached {total['cached_reported']:,} (expected "
            f"{total['cached_expected']:,}) · full price {total['full_price_tokens']:,}"
        ),
    )
    for column in ("session", "requests", "prompt", "cached", "expected", "full price"):
        table.add_column(column, justify="left" if column == "session" else "right")
    table.add_column("why")
    for m in members:
        totals = m.report.totals
        name = ("  " * (m.depth - 1) + "└ " if m.depth else "") + m.session.id
        table.add_row(
            Text(name),
            str(totals.requests),
            f"{totals.prompt_tokens:,}",
            f"{totals.cached_reported:,}",
            f"{totals.cached_expected:,}",
            f"{m.full_price:,}",
            Text(terminal_text(m.why())),
        )
    return table
