"""``tapelog report``: the HTML page, checked as text and in headless Chromium.

The session is real: an agent on the in-process emulator runs several turns,
calls tools, gains a tool mid-session and is resumed by a new agent with a
changed system prompt. The page is then opened in headless Chromium (which CI
installs; these tests fail, not skip, without it) to prove it loads, runs its
script without an error and draws one bar per loop request.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

# tests/ is the rootdir of the test packages (each has an __init__.py), so the agent
# tests' harness imports as ``agent._harness``.
from agent._harness import add, agent_on, shout
from tapelog.audit import encode_request, rebuild_requests, render_report
from tapelog.audit._report_html import _script_json
from tapelog.cli import cli
from tapelog.emulator import Emulator
from tapelog.log import decode
from tapelog.log._api import EpochHeader, LlmCallConfig, Session
from tapelog.store import JsonlStore

SYSTEM = "\n".join(f"Rule {i}: answer carefully and cite the tool output." for i in range(30))
INJECTION = "Shout <img src=x onerror=\"document.body.setAttribute('data-pwned','1')\"> please"
LONG_PROMPT = "Are you sure? " + "very " * 3000


SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "add", "arguments": '{"a": 2, "b": 3}'}]},
    {"text": "2 + 3 = 5."},
    {"text": "Yes, 5."},
    {"tool_calls": [{"name": "shout", "arguments": '{"text": "</script><b>hi</b>"}'}]},
    {"text": "Done: </SCRIPT><B>HI</B>"},
    {"text": "Still 5."},
]


async def _build(store: JsonlStore) -> str:
    emulator = Emulator(script=SCRIPT)
    session = Session()
    with store.create(session) as writer:
        async with agent_on(
            emulator, session=session, writer=writer, system=SYSTEM, tools=[add]
        ) as agent:
            await agent.run("What is 2 + 3?")
            await agent.run(LONG_PROMPT)
            agent.add_tool(shout)
            await agent.run(INJECTION)
    resumed, writer = store.open(session.id)
    with writer:
        async with agent_on(
            emulator,
            session=resumed,
            writer=writer,
            system=SYSTEM + "\nBe brief.",
            tools=[add, shout],
        ) as agent:
            await agent.run("And 2 + 3 again?")
    return session.id


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("sessions")
    return root, asyncio.run(_build(JsonlStore(root)))


@pytest.fixture(scope="module")
def session(stored: tuple[Path, str]) -> Session:
    root, session_id = stored
    return JsonlStore(root).load(session_id).session


@pytest.fixture(scope="module")
def page(session: Session, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(render_report(session), encoding="utf-8")
    return path


# --- headless Chromium ------------------------------------------------------------

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)


def chromium(profile: Path, page: Path, *mode: str) -> tuple[str, list[str]]:
    """Run headless Chromium on ``page``: its stdout, and every console line it logged."""
    if CHROMIUM is None:
        pytest.fail(
            "chromium is not installed; the report tests need it "
            "(Debian: apt-get install chromium, as .ci/run does)"
        )
    args = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=2000",
        *mode,
        page.as_uri(),
    ]
    done = subprocess.run(args, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
    # Console messages (including uncaught exceptions) look like
    # `[...:INFO:CONSOLE:12] "Uncaught Error: ...", source: file:///... (12)`.
    console = [
        line
        for line in done.stderr.splitlines()
        if re.search(r":CONSOLE[:(]", line) or "Uncaught" in line
    ]
    return done.stdout, console


def body_attributes(dom: str) -> str:
    match = re.search(r"<body([^>]*)>", dom)
    assert match, "the dumped DOM has no <body>"
    return match.group(1)


@pytest.fixture(scope="module")
def dom(page: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    return chromium(tmp_path_factory.mktemp("profile"), page, "--dump-dom")


def test_the_page_loads_and_its_script_runs_to_the_end_without_errors(
    dom: tuple[str, list[str]],
) -> None:
    html, console = dom
    assert console == [], "the page logged to the console:\n" + "\n".join(console)
    attributes = body_attributes(html)
    assert 'data-ok="1"' in attributes
    assert "data-error" not in attributes
    assert "data-pwned" not in attributes, "log text was interpreted as HTML"


def test_the_chart_has_one_bar_per_loop_request(
    dom: tuple[str, list[str]], session: Session
) -> None:
    html, _ = dom
    rebuilt = rebuild_requests(session.events, session_id=session.id)
    assert len(rebuilt) == 6
    indexes = re.findall(r'<g class="bar[^"]*" data-index="(\d+)"', html)
    assert indexes == [str(r.index) for r in rebuilt]
    assert html.count('<details class="request"') == len(rebuilt)


def test_the_browser_check_catches_a_script_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text(
        "<!DOCTYPE html><html><body><script>"
        'window.addEventListener("error", function (e) {'
        ' document.body.setAttribute("data-error", e.message); });'
        'undefinedFunction(); document.body.setAttribute("data-ok", "1");'
        "</script></body></html>",
        encoding="utf-8",
    )
    html, console = chromium(tmp_path / "profile", broken, "--dump-dom")
    assert any("undefinedFunction is not defined" in line for line in console), console
    assert "data-ok" not in body_attributes(html)
    assert "data-error" in body_attributes(html)


def test_a_screenshot_renders(page: Path, tmp_path: Path) -> None:
    png = tmp_path / "report.png"
    _, console = chromium(
        tmp_path / "profile", page, f"--screenshot={png}", "--window-size=1200,1600"
    )
    assert console == []
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 20_000, "the screenshot is suspiciously empty"


# --- the page as text ---------------------------------------------------------------


def test_cache_breaks_are_marked_on_their_bars_and_named(page: Path) -> None:
    html = page.read_text(encoding="utf-8")
    groups = {
        m.group(1): m.group(0)
        for m in re.finditer(r'<g class="bar[^"]*" data-index="(\d+)".*?</g>', html, flags=re.S)
    }
    broken = {i for i, g in groups.items() if 'class="bar break"' in g}
    # Request 4 (turn 3) is the first sent with the new tool; request 6 follows the resume.
    assert broken == {"4", "6"}
    assert "tools +shout" in groups["4"]
    assert "resume drift: system" in groups["6"]


def test_log_text_is_escaped_everywhere(page: Path) -> None:
    html = page.read_text(encoding="utf-8")
    assert "<img" not in html
    assert "&lt;img src=x onerror=" in html
    assert "<b>hi</b>" not in html
    assert "<B>HI</B>" not in html
    assert "&lt;/script&gt;&lt;b&gt;hi&lt;/b&gt;" in html


def test_embedded_json_cannot_close_its_script_element() -> None:
    text = _script_json({"a": "</script><!-- <script>", "b": [1, 2]})
    assert "<" not in text
    assert decode(text.replace("\\u003c", "<").encode()) == {
        "a": "</script><!-- <script>",
        "b": [1, 2],
    }


def test_the_page_loads_nothing_from_the_network(page: Path) -> None:
    html = page.read_text(encoding="utf-8")
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:[a-z]+:)?//""", html, flags=re.I)
    assert "<link" not in html
    assert "@import" not in html
    assert "url(" not in html
    assert "@font-face" not in html


def test_each_request_names_the_sha256_of_its_exact_body(page: Path, session: Session) -> None:
    html = page.read_text(encoding="utf-8")
    for item in rebuild_requests(session.events, session_id=session.id):
        body = encode_request(item.request)
        assert f"body {len(body):,} bytes, sha256 {hashlib.sha256(body).hexdigest()}" in html


def test_long_texts_are_clipped_with_a_note(page: Path) -> None:
    html = page.read_text(encoding="utf-8")
    assert "characters not shown in this report" in html
    assert html.count("very ") < 1500  # the 3,000-word prompt is clipped, and shown once


class _Log:
    """A log written event by event: each step answered, with usage, in one call."""

    def __init__(self) -> None:
        self.session = Session("s-hand", created=1_700_000_000_000, clock=lambda: 1_700_000_000_000)
        self.turn = 0
        self.prompt = 0

    def _step(self, step: int, content: list[dict[str, Any]]) -> None:
        s = self.session
        s.append("step/start", {"turn": self.turn, "step": step})
        if self.turn == 1 and step == 1:
            header = EpochHeader(config=LlmCallConfig(provider="openai", model="m"), system="Hi.")
            s.append("request/header", {"header": header.to_json(), "reason": "initial"})
        cached, self.prompt = self.prompt, self.prompt + 100
        usage = {"input": 100, "cache_read": cached, "cache_write": 0, "output": 5, "reasoning": 0}
        source = {"provider": "openai", "model": "m"}
        message = {"turn": self.turn, "step": step, "content": content, "source": source}
        s.append("assistant/message", message | {"usage": usage}, surface_op="append")

    def ask(self, text: str, *, tool_output: str | None = None) -> int | None:
        """One turn; with ``tool_output`` the model first calls a tool. The result's seq."""
        s, self.turn = self.session, self.turn + 1
        s.append("turn/start", {"turn": self.turn})
        user = {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}}
        s.append("user/message", user, surface_op="append")
        result_seq, step = None, 1
        if tool_output is not None:
            call = {"turn": self.turn, "step": 1, "call_id": f"k{self.turn}", "name": "read"}
            block = {"type": "tool_call", "id": call["call_id"], "name": "read", "arguments": "{}"}
            self._step(1, [block])
            s.append("tool/call", call | {"arguments": "{}"})
            result = call | {"content": tool_output, "is_error": False}
            del result["name"]
            result_seq = s.append("tool/result", result, surface_op="append").seq
            s.append("step/end", {"turn": self.turn, "step": 1})
            step = 2
        self._step(step, [{"type": "text", "text": f"answer {self.turn}"}])
        s.append("step/end", {"turn": self.turn, "step": step})
        s.append("turn/end", {"turn": self.turn, "reason": {"kind": "completed"}})
        return result_seq


def test_a_long_session_keeps_every_request_and_grows_linearly() -> None:
    pages = []
    for turns in (20, 80):
        log = _Log()
        for turn in range(turns):
            log.ask(f"question {turn}: " + "word " * 300)
        html = render_report(log.session)
        assert len(re.findall(r'<g class="bar[^"]*" data-index=', html)) == turns
        assert html.count('<details class="request"') == turns
        pages.append(len(html))
    # Each request shows only what it adds to the one before, so 4x the turns is
    # about 4x the page, not 16x.
    assert pages[1] < 5 * pages[0], pages


def test_compaction_and_trims_are_named_on_the_request_after_them() -> None:
    log = _Log()
    log.ask("one")
    result = log.ask("read it", tool_output="x" * 500)  # requests 2 and 3
    assert result is not None
    s = log.session
    trimmed = dict(s.event(result).data) | {"content": "x\n[... 499 characters trimmed ...]"}
    s.append(
        "tool/result",
        trimmed,
        surface_op={"op": "replace", "start": result, "end": result},
        source_seqs=[result],
    )
    log.ask("two")  # request 4: after the trim
    shadowed = s.surface[:4]
    s.append("compact/start", {"id": "c1", "trigger": "manual", "turn": None, "context_tokens": 9})
    summary = {"id": "c1", "provider": "openai", "model": "m", "max_tokens": 64}
    span = {"start": shadowed[0], "end": shadowed[-1]}
    s.append("compact/summary", summary | {"shadowed": span, "shadowed_seqs": shadowed})
    s.append(
        "user/message",
        {
            "content": [{"type": "text", "text": "summary"}],
            "source": {"kind": "compaction", "id": "c1"},
        },
        surface_op={"op": "replace"} | span,
        source_seqs=shadowed,
    )
    s.append("compact/end", {"id": "c1", "ok": True})
    log.ask("three")  # request 5: after the compaction
    html = render_report(s)
    groups = {
        m.group(1): m.group(0)
        for m in re.finditer(r'<g class="bar[^"]*" data-index="(\d+)".*?</g>', html, flags=re.S)
    }
    assert len(groups) == 5
    assert {i for i, g in groups.items() if 'class="bar break"' in g} == {"4", "5"}
    assert "trim 1 result" in groups["4"]
    assert "compaction c1" in groups["5"]
    assert "Does not extend" in html  # the rewritten history is shown in full


# --- the command -------------------------------------------------------------------


def run(*args: str, debug: bool = False) -> Result:
    return CliRunner().invoke(cli, list(args), obj={"debug": debug})


def test_the_command_writes_the_page(stored: tuple[Path, str], tmp_path: Path) -> None:
    root, session_id = stored
    out = tmp_path / "r.html"
    result = run("report", session_id, "--store", str(root), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"wrote {out} (6 request(s), ")
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert session_id in html


def test_an_unknown_session_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = run("report", "nope", "--store", str(tmp_path), "-o", str(tmp_path / "r.html"))
    assert result.exit_code == 2
    assert result.output == (
        f"error: no session nope in the store at {tmp_path}; "
        "`tapelog sessions` lists the stored sessions\n"
    )
    assert not (tmp_path / "r.html").exists()


def test_an_unwritable_output_is_one_line_and_exit_2(
    stored: tuple[Path, str], tmp_path: Path
) -> None:
    root, session_id = stored
    result = run("report", session_id, "--store", str(root), "-o", str(tmp_path))
    assert result.exit_code == 2
    assert result.output == (
        f"error: cannot write {tmp_path} (Is a directory); name a file, not a directory.\n"
    )


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = run("report", "nope", "--store", str(tmp_path), "-o", "x.html", debug=True)
    assert result.exit_code == 1
    assert result.exception is not None
    assert "no session nope" in str(result.exception)
