"""``tapelog proxy``: any agent's requests, logged and rebuilt, by changing one base URL.

A client (an OpenAI or Anthropic SDK, an agent framework, any program in any
language) points its base URL at the proxy; the proxy turns each request into
log events and forwards to the upstream **the bytes rebuilt from the log**,
so ``tapelog requests`` reproduces byte for byte what the upstream received
and the cache audit can name every break in the client's prefix.

Exactness: carry, never reshape. A client's request becomes the log's header
(model, options, extras, system prompt, tools, the request headers that
change what the model reads) and neutral messages; what those do not name is
kept as given, and before anything is logged the proxy sends the translation
back through the upstream's wire and compares it with the client's body.
On the Anthropic Messages API the two parse equal: every field is carried (a
system prompt as blocks, the client's cache markers where it put them,
thinking signatures, server tools, ``document`` / ``search_result`` /
unknown blocks as ``wire`` blocks, message fields such as ``output_config``,
every top-level field in the client's order), and the one difference is
``stream`` (the proxy always streams from the upstream). Its
``anthropic-beta`` and ``anthropic-version`` headers and its query string
(``?beta=true``) are logged (``config.headers``, ``config.wire.query``) and
sent from the log. On chat completions a ``developer`` or ``system`` message
anywhere is a ``user/message`` with its ``role``, the members of a message
the blocks do not name are its ``fields``, a content part that is not plain
text or a plain image URL is an ``openai_part`` block, the token limit keeps
the client's spelling (``config.wire.token_field``), and the other choices of
an ``n`` > 1 answer are its ``alternatives`` (docs/format.md); the comparison
is in a normal form that keeps everything a provider reads (whitespace, key
order outside tool schemas and inputs, ``stream`` / ``stream_options``: the
proxy always streams from the upstream, with usage). On the Responses API
every item is carried (``tapelog.proxy._responses_in``). What is refused is
what cannot be forwarded at all: a body that is not JSON or not a request
object, a message or block that is not an object, a value of the wrong type,
a tool call without its result, two token limits that differ, an unknown
endpoint, a request for the other API, each a 400 in the client API's error
shape, with nothing logged (docs/proxy.md, "What is refused"). Reasoning the
client sends back (``reasoning_content``) is a logged wire option
(``config.wire.reasoning_send_back``) chosen to reproduce the client.

A non-streaming client gets the answer assembled from the upstream's stream
in the shape of a non-streamed answer (``_answers``); a streaming client gets
the upstream's bytes unchanged, plus a usage event it may not have asked for.
Every answer that has a session names it in ``X-Tapelog-Session``; with
``watch_cache`` the cache audit runs as each turn ends and a request whose
cacheable prefix broke gets a ``cache_break`` line in its summary.
The piece that ends a stream reaches the client only once the turn's end is
logged and written (synced right after, off the client's wait: ``_turn_end``).
An upstream error answer is passed on as it came (status,
body, headers) and logged as the turn's error; the request counts as sent. A
stream that breaks (the connection drops, or no ``[DONE]`` / ``message_stop``)
is logged as the turn's error and ends with the API's own error event, so the
client's SDK raises instead of taking the part for the whole.

Only programs may use it (``_guard``): a ``Host`` that is not a loopback name
is a 421, an ``Origin`` header not allowed a 403, a body not declared
``application/json`` a 415, all before the body is read, so a web page in the
user's browser cannot write turns or spend the upstream.

What the log does not hold: credentials (passed on, never logged) and the
client's other request headers. Only the generation endpoints are served (no
model lists, no token counting).

Sessions. A request names its session explicitly with the path prefix
``/s/<session-id>/`` or the header ``X-Tapelog-Session`` (not forwarded); the
session is created if the store lacks it, and the request's messages replace
what differs from its history. Otherwise the session is found automatically
(``_index``): a request that extends a conversation's last request plus its
logged answer joins it; one that still holds that answer at the same place
but changed something before it joins it with a replace; one that shares a
prefix with an earlier turn end of a session is logged as a fork of it (the
store's fork: the seed up to that ``turn/end``, then ``session/end-seed``);
anything else starts a new session named ``proxy-<time>-<random>``. A matched
request of another agent of the client (``_identity``: a different system
prompt and tool set or model, or another conversation id the client gives)
branches instead: a new session linked to the matched one by its first
event, ``session/origin``, so a subagent's request is never logged as a
rewrite of the main agent's header.
Comparison uses loose message keys (reasoning, whitespace around text and the
formatting of tool arguments ignored), then the exact wire bytes; a change
the model sees is a logged replace from the first changed message to the
end. Each session has one lock held from matching to the answer's end, and a
request whose conversation is busy forks rather than waits, so parallel
conversations are never mixed. The index holds digests, not logs; at start
it is rebuilt from the newest ``proxy-`` sessions of the store. Limits: two
clients that send identical conversations are indistinguishable (either
session is a faithful log of both); a branch taken in the middle of a turn
forks at the turn before; a request whose first message changes and that no
longer holds the session's last answer starts a new session.

Driving it from code::

    proxy = Proxy(Upstream.resolve("deepseek"), JsonlStore(path), on_request=print)
    # serve proxy.app (uvicorn runs its lifespan: index at start, close at the
    # end), or in process: httpx.AsyncClient(transport=httpx.ASGITransport(proxy.app))
    # and then ``await proxy.aclose()``; ``http_client=`` sends to an in-process
    # upstream (an emulator's ``transport()``).
"""

from tapelog._errors import ProxyError
from tapelog.proxy._app import Proxy
from tapelog.proxy._upstream import Upstream

__all__ = [
    "Proxy",
    "ProxyError",
    "Upstream",
]
