"""OpenAI Responses API stream events -> neutral chunks (pure, one parser per stream).

Each event's ``data`` is a JSON object whose ``type`` names it (the SSE
``event:`` line repeats it). Output items are numbered by ``output_index``,
which is the chunks' ``index``: the blocks of the assembled message keep the
order of the response's output. What becomes of each event:

* ``response.output_text.delta`` / ``response.refusal.delta`` -> ``text``;
* ``response.reasoning_summary_text.delta`` (and ``response.reasoning_text.delta``,
  raw reasoning from open-weight servers) -> ``reasoning``; a new summary part
  of the same item is set off by a blank line;
* ``response.output_item.added`` of a ``function_call`` and
  ``response.function_call_arguments.delta`` -> ``tool_call`` (id = ``call_id``);
* ``response.output_item.done``: a ``message`` or ``function_call`` item ->
  ``output_item``, the item without the text or arguments its deltas gave
  (ids, status, annotations: logged, not part of the message); a
  ``reasoning`` item -> ``reasoning_item``
  (every field but ``type``, verbatim: ``id``, ``summary``,
  ``encrypted_content``...; the message's reasoning block gets them, so it can
  be sent back byte for byte); an item type the loop does not run -> ``item``
  (an opaque block sent back as given); text or arguments a server put only in
  the done item are emitted here;
* ``response.completed`` -> ``usage`` and ``finish`` (``tool_calls`` when the
  output has function calls, else ``stop``); ``response.incomplete`` ->
  ``usage`` and ``finish`` (``max_tokens`` for ``max_output_tokens``);
  ``response.failed`` and ``error`` -> :class:`ProviderError`.

Other events (``response.created``, ``...content_part.added``, the ``.done``
events whose text the deltas already gave) change nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from httpx_sse import ServerSentEvent

from tapelog._errors import ProviderError
from tapelog.llm._http import event_frame
from tapelog.llm._types import normalise_usage, usage_count
from tapelog.log import redact
from tapelog.log._api import FrozenDict, freeze

__all__ = ["ResponsesStreamParser", "responses_usage"]

_LOOP_ITEMS: Final = ("message", "function_call", "reasoning")
"""The output item types the loop understands; any other is carried as an ``item`` block."""

_RETRYABLE: Final = ("server_error", "rate_limit_exceeded", "vector_store_timeout")


def responses_usage(usage: Mapping[str, Any]) -> FrozenDict:
    """Normalise a Responses usage object to disjoint counts.

    ``input_tokens`` includes ``input_tokens_details.cached_tokens`` (read
    from the prompt cache) and, for models that report it,
    ``input_tokens_details.cache_write_tokens``; ``reasoning`` is the part of
    ``output_tokens`` in ``output_tokens_details.reasoning_tokens``.
    """
    details = usage.get("input_tokens_details")
    details = details if isinstance(details, Mapping) else {}
    output_details = usage.get("output_tokens_details")
    output_details = output_details if isinstance(output_details, Mapping) else {}
    prompt = usage_count(usage.get("input_tokens"))
    cached = usage_count(details.get("cached_tokens"))
    write = usage_count(details.get("cache_write_tokens"))
    return normalise_usage(
        input=max(prompt - cached - write, 0),
        cache_read=cached,
        cache_write=write,
        output=usage_count(usage.get("output_tokens")),
        reasoning=usage_count(output_details.get("reasoning_tokens")),
        raw=usage,
    )


def _summary_text(summary: Any) -> str:
    """The text of a reasoning item's summary parts, a blank line between them."""
    parts = summary if isinstance(summary, list) else ()
    return "\n\n".join(
        p["text"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str)
    )


def _envelope(index: int, item: Mapping[str, Any]) -> dict[str, Any]:
    """An ``output_item`` chunk: the done item without the text or arguments its
    deltas already gave (its ``id``, ``status``, the parts' ``annotations``...),
    so nothing the provider said is lost from the log, and nothing is logged twice."""
    kept: dict[str, Any] = {}
    for key, value in item.items():
        if key == "arguments":
            continue
        if key == "content" and isinstance(value, list):
            value = [
                {k: v for k, v in p.items() if k not in ("text", "refusal")}
                if isinstance(p, Mapping)
                else p
                for p in value
            ]
        kept[key] = value
    return {"kind": "output_item", "index": index, "item": kept}


class ResponsesStreamParser:
    """Feed it server-sent events; it returns the neutral chunks each one makes."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.done = False
        self._finish: tuple[str, Any] | None = None
        self._streamed: dict[int, str] = {}  # output index -> text/arguments seen so far
        self._calls: set[int] = set()  # output indexes of function calls
        self._summary_part: dict[int, int] = {}  # reasoning item -> its last summary index

    def feed(self, event: ServerSentEvent) -> list[FrozenDict]:
        frame = event_frame(self.provider, event.data)
        if frame is None:
            return []
        etype = frame.get("type") or event.event
        out: list[dict[str, Any]] = []
        index = frame.get("output_index")
        index = index if isinstance(index, int) and not isinstance(index, bool) else 0
        if etype in ("response.output_text.delta", "response.refusal.delta"):
            self._piece(out, "text", index, frame.get("delta"))
        elif etype == "response.reasoning_summary_text.delta":
            part = frame.get("summary_index")
            last = self._summary_part.get(index)
            if last is not None and part != last:
                self._piece(out, "reasoning", index, "\n\n")
            self._summary_part[index] = part if isinstance(part, int) else 0
            self._piece(out, "reasoning", index, frame.get("delta"))
        elif etype == "response.reasoning_text.delta":
            self._piece(out, "reasoning", index, frame.get("delta"))
        elif etype == "response.function_call_arguments.delta":
            self._piece(out, "tool_call", index, frame.get("delta"))
        elif etype == "response.output_item.added":
            self._added(out, index, frame.get("item"))
        elif etype == "response.output_item.done":
            self._item_done(out, index, frame.get("item"))
        elif etype in ("response.completed", "response.incomplete"):
            self._completed(out, etype, frame.get("response"))
        elif etype == "response.failed":
            response = frame.get("response")
            error = response.get("error") if isinstance(response, Mapping) else None
            raise self._error(error, "the response failed")
        elif etype == "error":
            raise self._error(frame, "error event")
        return [freeze(chunk) for chunk in out]

    def _piece(self, out: list[dict[str, Any]], kind: str, index: int, text: Any) -> None:
        if not isinstance(text, str) or not text:
            return
        if kind == "tool_call":
            self._calls.add(index)
            out.append({"kind": "tool_call", "index": index, "arguments": text})
        else:
            out.append({"kind": kind, "text": text, "index": index})
        self._streamed[index] = self._streamed.get(index, "") + text

    def _added(self, out: list[dict[str, Any]], index: int, item: Any) -> None:
        if not isinstance(item, Mapping) or item.get("type") != "function_call":
            return
        self._calls.add(index)
        piece: dict[str, Any] = {"kind": "tool_call", "index": index}
        if isinstance(item.get("call_id"), str) and item["call_id"]:
            piece["id"] = item["call_id"]
        if isinstance(item.get("name"), str) and item["name"]:
            piece["name"] = item["name"]
        arguments = item.get("arguments")
        piece["arguments"] = arguments if isinstance(arguments, str) else ""
        self._streamed[index] = self._streamed.get(index, "") + piece["arguments"]
        out.append(piece)

    def _item_done(self, out: list[dict[str, Any]], index: int, item: Any) -> None:
        if not isinstance(item, Mapping):
            return
        itype = item.get("type")
        if itype == "reasoning":
            if index not in self._streamed:  # a server that sends no summary deltas
                summary = item.get("summary")
                self._piece(out, "reasoning", index, _summary_text(summary))
            fields = {k: v for k, v in item.items() if k not in ("type", "text")}
            out.append({"kind": "reasoning_item", "index": index, "item": fields})
        elif itype == "function_call":
            if index not in self._calls:
                self._added(out, index, {**item, "arguments": ""})
            self._rest(out, "tool_call", index, item.get("arguments"))
            out.append(_envelope(index, item))
        elif itype == "message":
            parts = item.get("content")
            text = "".join(
                str(p.get("text") or p.get("refusal") or "")
                for p in (parts if isinstance(parts, list) else ())
                if isinstance(p, Mapping)
            )
            self._rest(out, "text", index, text)
            out.append(_envelope(index, item))
        elif itype not in _LOOP_ITEMS:
            out.append({"kind": "item", "index": index, "item": item})

    def _rest(self, out: list[dict[str, Any]], kind: str, index: int, whole: Any) -> None:
        """What the done item holds beyond what was streamed (all of it, from a
        server that sends no deltas)."""
        if not isinstance(whole, str):
            return
        seen = self._streamed.get(index, "")
        if whole.startswith(seen):
            self._piece(out, kind, index, whole[len(seen) :])

    def _completed(self, out: list[dict[str, Any]], etype: str, response: Any) -> None:
        response = response if isinstance(response, Mapping) else {}
        usage = response.get("usage")
        if isinstance(usage, Mapping):
            out.append({"kind": "usage", "usage": responses_usage(usage)})
        if etype == "response.completed":
            reason = "tool_calls" if self._calls else "stop"
            self._finish = (reason, response.get("status", "completed"))
        else:
            details = response.get("incomplete_details")
            why = details.get("reason") if isinstance(details, Mapping) else None
            reason = "max_tokens" if why == "max_output_tokens" else "error"
            self._finish = (reason, why if why is not None else "incomplete")
        self.done = True

    def _error(self, error: Any, what: str) -> ProviderError:
        # A provider may echo the request's API key: redacted before it reaches the log.
        error = error if isinstance(error, Mapping) else {}
        message = redact(str(error.get("message") or what))
        code = error.get("code")
        return ProviderError(
            f"{self.provider} reported an error in the middle of the stream"
            f"{f' ({code})' if isinstance(code, str) else ''}: {message}. Retrying may help.",
            body=message[:300],
            retryable=code in _RETRYABLE or code is None,
        )

    def end(self) -> list[FrozenDict]:
        """The closing ``finish`` chunk; raises if the stream was cut before one."""
        if self._finish is None:
            raise ProviderError(
                f"The {self.provider} stream ended before the response completed (no "
                "response.completed arrived); the partial answer is logged and the request "
                "can be retried.",
                retryable=True,
            )
        reason, raw = self._finish
        return [freeze({"kind": "finish", "reason": reason, "raw": raw})]
