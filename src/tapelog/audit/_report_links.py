"""Where the report's links point: one page (the static report) or many (``tapelog serve``).

The report's views link a request to the events that explain it and back:
a timeline step to its request, a cause to its seqs, a request to the first
one with the same system prompt. In the static report every target is on the
one page, so each link is an anchor (``#req-7``, ``#seq-42``). The live server
shows a long session a window of requests at a time, so a target may be on
another window's page; it passes its own :class:`ReportLinks`. The views never
build a URL themselves, so the two pages cannot drift apart.

Every string a method returns is already safe in an HTML attribute.
"""

from __future__ import annotations

__all__ = ["ReportLinks"]


class ReportLinks:
    """Anchors on one page: the static report's links (subclass for other pages)."""

    def request(self, index: int) -> str:
        """The href of loop request ``index`` (1-based)'s section."""
        return f"#req-{index}"

    def seq(self, seq: int) -> str:
        """The href of the timeline entry of event ``seq``."""
        return f"#seq-{seq}"

    def session(self, session_id: str) -> str | None:
        """The href of another session's page (``None``: not linked, e.g. a fork's parent)."""
        del session_id
        return None

    def request_actions(self, index: int) -> str:
        """Extra HTML in request ``index``'s section (the server: download, diff)."""
        del index
        return ""
