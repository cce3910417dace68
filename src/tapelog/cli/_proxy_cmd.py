"""``tapelog proxy``: log and rebuild any agent's requests by changing its base URL.

The proxy forwards with whatever credentials its clients send and has no
authentication of its own, so it binds a loopback address and answers
loopback ``Host`` names only unless ``--allow-remote`` says otherwise, and
refuses requests from web pages (an ``Origin`` header) unless
``--allow-origin`` names their origin. It prints where it listens and the
environment variables common clients read, then one line per request
(session, cached/prompt tokens, what changed) and, unless ``--quiet``, one
more for each request whose cacheable prefix broke (the cache audit's causes,
run live); every line goes through the terminal filter (names and errors
come from clients and the upstream).
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse

import click

from tapelog._loopback import is_loopback
from tapelog.cli._common import OneLineError, listen, store_option
from tapelog.cli._providers import providers_option
from tapelog.cli._stores import open_store, store_label
from tapelog.cli._terminal import terminal_text

__all__ = ["COMMANDS", "client_settings"]


def client_settings(host: str, port: int, family: str) -> list[str]:
    """The environment lines that point common clients of ``family`` at the proxy."""
    shown = f"[{host}]" if ":" in host else host
    root = f"http://{shown}:{port}"
    if family == "anthropic":
        return [f"ANTHROPIC_BASE_URL={root}"]
    return [f"OPENAI_BASE_URL={root}/v1", f"OPENAI_API_BASE={root}/v1"]


@click.command("proxy")
@click.option(
    "--upstream",
    required=True,
    metavar="PROVIDER|URL",
    help="Where to forward: openai, deepseek, anthropic, a registered provider, or the base "
    "URL of an OpenAI-compatible server.",
)
@click.option("--base-url", default=None, help="Override the upstream provider's base URL.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port",
    default=8790,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (0: a free one, printed).",
)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a non-loopback --host (the proxy has no authentication of its own).",
)
@click.option(
    "--allow-origin",
    "allow_origins",
    multiple=True,
    metavar="ORIGIN",
    help="Let web pages of this origin (e.g. http://localhost:3000) use the proxy; repeatable. "
    "Requests that carry any other Origin are refused.",
)
@click.option(
    "--check/--no-check",
    default=None,
    help="Rebuild every request from the log before sending it (default: on, or $TAPELOG_CHECK).",
)
@click.option(
    "--resume-sessions",
    default=100,
    show_default=True,
    type=click.IntRange(min=0),
    help="When the store has no conversation index yet, how many of the newest stored proxy "
    "sessions to rebuild it from (a store with one is read whole).",
)
@click.option(
    "--quiet",
    is_flag=True,
    help="Do not print a line for each request whose cacheable prefix broke (the cache "
    "audit run live).",
)
@store_option
@providers_option
def proxy_command(
    upstream: str,
    base_url: str | None,
    host: str,
    port: int,
    allow_remote: bool,
    allow_origins: tuple[str, ...],
    check: bool | None,
    resume_sessions: int,
    quiet: bool,
    store: str | None,
) -> None:
    """Serve an OpenAI / Anthropic API that logs every request and forwards the bytes
    rebuilt from the log (docs/proxy.md)."""
    if not is_loopback(host) and not allow_remote:
        raise click.BadParameter(
            f"{host} is not a loopback address; the proxy forwards whatever credentials its "
            "clients send and has no authentication of its own, so bind 127.0.0.1, ::1 or "
            "localhost (or pass --allow-remote).",
            param_hint="--host",
        )
    for origin in allow_origins:
        parts = urllib.parse.urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            raise click.BadParameter(
                f"{origin!r} is not a web origin; give scheme://host[:port], e.g. "
                "http://localhost:3000",
                param_hint="--allow-origin",
            )
    import uvicorn

    from tapelog.proxy import Proxy, ProxyError, Upstream
    from tapelog.proxy._api import RequestSummary

    try:
        target = Upstream.resolve(upstream, base_url=base_url)
    except ProxyError as exc:
        raise click.BadParameter(str(exc), param_hint="--upstream") from None
    sessions = open_store(store)

    def report(summary: RequestSummary) -> None:
        click.echo(terminal_text(summary.line()))
        if summary.cache_break is not None:
            click.echo(terminal_text(summary.cache_break))

    said: set[str] = set()

    def unknown(message: str) -> None:
        # Once per method and path: a client polling /v1/models says it once.
        if message not in said and len(said) < 1000:
            said.add(message)
            click.echo(f"404: {terminal_text(message)}")

    sock = listen(host, port)
    proxy = Proxy(
        target,
        sessions,
        check=check,
        on_request=report,
        on_unknown=unknown,
        scan_limit=resume_sessions,
        check_host=not allow_remote,
        allowed_origins=allow_origins,
        watch_cache=not quiet,
    )
    bound = sock.getsockname()[1]

    async def serve() -> None:
        try:
            count = await proxy.start()
            shown = f"[{host}]" if ":" in host else host
            click.echo(
                f"tapelog proxy on http://{shown}:{bound}, forwarding to {target.provider} "
                f"({terminal_text(target.base_url)})"
            )
            click.echo(f"sessions in {terminal_text(store_label(sessions))} ({count} resumable)")
            click.echo("point your client at it:")
            for line in client_settings(host, bound, target.family):
                click.echo(f"  export {line}")
            click.echo(
                f"name a session with the header X-Tapelog-Session: ID or the path prefix "
                f"http://{shown}:{bound}/s/ID/ (Ctrl-C stops)"
            )
            config = uvicorn.Config(proxy.app, log_level="warning", access_log=False, lifespan="on")
            await uvicorn.Server(config).serve(sockets=[sock])
        finally:
            await proxy.aclose()

    try:
        with sock, contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve())
    except OSError as exc:
        raise OneLineError(f"the proxy stopped: {exc.strerror or exc}") from None


COMMANDS: list[click.Command] = [proxy_command]
