"""Bad input on the command line: one readable line (or click's usage error),
the right exit code, and nothing logged or left behind that the input did not earn.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from tapelog.cli import cli

TAPELOG = str(Path(sys.executable).with_name("tapelog"))
BAD = "\udcff"  # how Python hands over an argv byte that is not UTF-8


def _invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), obj={"debug": False}, input=input)


def _store_files(store: Path) -> list[str]:
    return sorted(p.name for p in store.glob("*.jsonl")) if store.exists() else []


@pytest.mark.parametrize(
    ("args", "param"),
    [
        (["run", "caf" + BAD], "PROMPT"),
        (["run", "hi", "--system", BAD], "--system"),
        (["run", "hi", "--model", BAD], "--model"),
    ],
)
def test_text_that_is_not_utf8_is_a_usage_error_and_stores_nothing(
    tmp_path: Path, args: list[str], param: str
) -> None:
    store = tmp_path / "store"
    result = _invoke(*args, "--tools", "none", "--session", "s", "--store", str(store))
    assert result.exit_code == 2
    assert f"Invalid value for {param}: not valid UTF-8 text" in result.output
    assert "set the terminal or the file to UTF-8" in result.output
    assert _store_files(store) == []


@pytest.mark.parametrize("errors", ["surrogateescape", "strict"])  # C.UTF-8 / en_US.UTF-8
def test_chat_skips_a_line_that_is_not_utf8_and_goes_on(tmp_path: Path, errors: str) -> None:
    store = tmp_path / "store"
    done = subprocess.run(
        [TAPELOG, "chat", "--tools", "none", "--session", "c", "--store", str(store)],
        input=b"one\n\xff\xfe\ntwo\n",
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": f"utf-8:{errors}"},
        timeout=60,
        check=False,
    )
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert "error: that prompt is not valid UTF-8 text (nothing was logged)" in err
    assert b"ok: one" in done.stdout
    assert b"ok: two" in done.stdout
    assert "Traceback" not in err
    log = (store / "c.jsonl").read_text()
    assert log.count('"type":"turn/start"') == 2


def test_a_system_file_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    system = tmp_path / "system.txt"
    system.write_bytes(b"Be terse.\n\xff\n")
    store = tmp_path / "store"
    result = _invoke(
        "run", "hi", "--tools", "none", "--system-file", str(system), "--store", str(store)
    )
    assert result.exit_code == 2
    assert (
        f"Invalid value for --system-file: {system} is not UTF-8 text (byte 10 cannot be "
        "decoded); save it as UTF-8 and try again."
    ) in " ".join(result.output.split())
    assert "bug" not in result.output
    assert _store_files(store) == []


@pytest.mark.parametrize("model", [[], ["--model", "m"]])
def test_an_unknown_provider_is_named_with_the_known_ones(tmp_path: Path, model: list[str]) -> None:
    store = tmp_path / "store"
    result = _invoke("run", "hi", "--provider", "nope", *model, "--store", str(store))
    assert result.exit_code == 2
    assert (
        "Invalid value for --provider: 'nope' is not a known provider; use one of "
        "anthropic, compatible, deepseek, emulator, lmstudio, local, ollama, openai, "
        "openrouter, together, vllm, or register it in a providers file"
    ) in " ".join(result.output.split())
    assert "default model" not in result.output
    assert _store_files(store) == []


def test_an_unknown_provider_in_the_environment_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAPELOG_PROVIDER", "nope")
    result = _invoke("run", "hi", "--store", str(tmp_path / "store"))
    assert result.exit_code == 2
    assert "Invalid value for $TAPELOG_PROVIDER: 'nope' is not a known provider" in result.output


@pytest.mark.parametrize("command", ["show", "verify", "requests", "cache", "report"])
@pytest.mark.parametrize(
    ("target", "why"), [("", "it is empty"), ("a" * 300, "it is 300 characters long")]
)
def test_an_empty_or_overlong_session_target_is_an_invalid_id(
    tmp_path: Path, command: str, target: str, why: str
) -> None:
    extra = ["-o", str(tmp_path / "r.html")] if command == "report" else []
    result = _invoke(command, target, "--store", str(tmp_path / "store"), *extra)
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: invalid session id '")
    assert f"': {why}; a session id is 1 to 128 characters" in lines[0]


def test_emulator_on_a_busy_port_is_one_usage_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _invoke("emulator", "--port", str(port))
    assert result.exit_code == 2
    assert (
        f"Invalid value for --port: cannot listen on 127.0.0.1 port {port} (Address already "
        "in use); stop what uses it or pick another port (0 picks a free one)."
    ) in " ".join(result.output.split())
    assert "emulator   http" not in result.output  # no URL of a server that never ran


def test_emulator_port_0_prints_the_port_it_listens_on() -> None:
    with subprocess.Popen(
        [TAPELOG, "emulator", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline().decode()
            assert first.startswith("emulator   http://127.0.0.1:")
            url = first.split()[1].removesuffix("/v1")
            assert not url.endswith(":0")
            deadline = time.monotonic() + 10
            while True:
                try:
                    answer = httpx.get(f"{url}/health", timeout=2)
                    break
                except httpx.ConnectError:
                    assert time.monotonic() < deadline, "the emulator did not answer"
                    time.sleep(0.05)
            assert answer.json() == {"ok": True}
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=10) == 0


def test_resuming_a_torn_log_warns_once(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = _invoke("run", "one", "--tools", "none", "--session", "t", "--store", str(store))
    assert first.exit_code == 0, first.output
    log = store / "t.jsonl"
    whole = log.read_bytes()
    # the next write cut in its first line, as a crash leaves it (whole lines after
    # the last digest are refused: tests/store/test_undigested.py)
    log.write_bytes(whole + b'{"seq":99,"time":1,"type":"turn/sta')
    # A real process: pytest's own log handler would hide a second, bare print.
    done = subprocess.run(
        [TAPELOG, "run", "two", "--tools", "none", "--session", "t", "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    torn = [line for line in done.stderr.splitlines() if "dropped an incomplete final line" in line]
    assert len(torn) == 1
    assert torn[0].startswith("warning: session t (")
    assert log.read_bytes().startswith(whole)


@pytest.mark.parametrize("url", ["notaurl", "ftp://host/v1", "http:///v1", "127.0.0.1:8765/v1"])
def test_a_base_url_that_is_no_http_url_is_a_usage_error(tmp_path: Path, url: str) -> None:
    store = tmp_path / "store"
    result = _invoke("run", "hi", "--tools", "none", "--base-url", url, "--store", str(store))
    assert result.exit_code == 2
    assert (
        f"Invalid value for --base-url: {url!r} is not an http:// or https:// URL with a "
        "host; give the provider's base URL, e.g. http://127.0.0.1:8765/v1."
    ) in " ".join(result.output.split())
    assert _store_files(store) == []


def test_fork_with_an_empty_id_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = _invoke("run", "one", "--tools", "none", "--session", "p", "--store", str(store))
    assert first.exit_code == 0, first.output
    result = _invoke("fork", "p", "--at", "9", "--id", "", "--store", str(store))
    assert result.exit_code == 2
    assert result.output.startswith("error: invalid session id '': it is empty; ")
    assert _store_files(store) == ["p.jsonl"]


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("missing/r.html", "(No such file or directory); create its directory first, or give "
         "another path."),
        (".", "(Is a directory); name a file, not a directory."),
        ("afile/r.html", "(Not a directory); give another path."),
    ],
)  # fmt: skip
def test_report_to_a_path_that_cannot_be_written_is_one_line(
    tmp_path: Path, where: str, expected: str
) -> None:
    store = tmp_path / "store"
    first = _invoke("run", "one", "--tools", "none", "--session", "r", "--store", str(store))
    assert first.exit_code == 0, first.output
    (tmp_path / "afile").write_text("x")
    output = tmp_path / where
    result = _invoke("report", "r", "--store", str(store), "-o", str(output))
    assert result.exit_code == 2
    assert result.output == f"error: cannot write {output} {expected}\n"


def test_requests_out_under_a_file_is_one_line(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = _invoke("run", "one", "--tools", "none", "--session", "q", "--store", str(store))
    assert first.exit_code == 0, first.output
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "bodies"
    result = _invoke("requests", "q", "--store", str(store), "--out", str(out))
    assert result.exit_code == 2
    assert result.output.endswith(
        f"error: cannot write {out / '0001.json'} (Not a directory); give another path.\n"
    )


def test_an_unreadable_session_does_not_squeeze_the_sessions_table(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = _invoke("run", "one", "--tools", "none", "--session", "fine", "--store", str(store))
    assert first.exit_code == 0, first.output
    header = (store / "fine.jsonl").read_text().splitlines()[0]
    (store / "old.jsonl").write_text(header.replace('"format_version":0', '"format_version":7'))
    result = CliRunner().invoke(
        cli, ["sessions", "--store", str(store)], obj={"debug": False}, env={"COLUMNS": "100"}
    )
    assert result.exit_code == 0, result.output
    assert "created (UTC)" in result.output
    for column in ("efficiency", "lost tok", "status"):
        assert column in result.output
    fine = next(line for line in result.output.splitlines() if " fine " in line)
    assert re.search(r"│ \d{4}-\d\d-\d\d \d\d:\d\d:\d\d │ +\d+ │", fine), fine
    assert re.search(r"│ ended +│", fine), fine
    old = next(line for line in result.output.splitlines() if line.startswith("│ old "))
    assert re.search(r"│ damaged +│", old), old
    assert "\ndamaged:\n  old: " in result.output


def test_diff_on_a_session_without_requests_says_so(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "new.jsonl").write_text('{"format_version":0,"id":"new","created":1}\n')
    result = _invoke("diff", "new", "1", "1", "--store", str(store))
    assert result.exit_code == 2
    assert result.output == (
        "error: request 1 does not exist: the session has no loop requests yet; "
        "run a turn first (see `tapelog show`).\n"
    )


@pytest.mark.parametrize("prompt", ["", "  \n"])
def test_run_with_an_empty_prompt_is_a_usage_error(tmp_path: Path, prompt: str) -> None:
    store = tmp_path / "store"
    result = _invoke("run", prompt, "--tools", "none", "--store", str(store))
    assert result.exit_code == 2
    assert "Invalid value for PROMPT: it is empty; give the text to send." in result.output
    assert _store_files(store) == []


def test_a_directory_named_like_the_session_does_not_hide_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    first = _invoke("run", "one", "--tools", "none", "--session", "notes", "--store", str(store))
    assert first.exit_code == 0, first.output
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes").mkdir()  # e.g. the workspace the session works on
    shown = _invoke("verify", "notes", "--store", str(store))
    assert shown.exit_code == 0, shown.output
    assert shown.output.startswith("ok: notes: ")
    here = _invoke("verify", ".", "--store", str(store))
    assert here.exit_code == 2
    assert here.output == "error: . is a directory; give a session id or a session file\n"


@pytest.mark.parametrize("kind", ["broken link", "directory"])
def test_a_non_file_where_a_new_session_goes_is_named(tmp_path: Path, kind: str) -> None:
    store = tmp_path / "store"
    store.mkdir()
    blocker = store / "b.jsonl"
    if kind == "directory":
        blocker.mkdir()
    else:
        blocker.symlink_to(tmp_path / "nowhere")
    result = _invoke("run", "hi", "--tools", "none", "--session", "b", "--store", str(store))
    assert result.exit_code == 2
    assert result.output.endswith(
        f"error: {blocker} is in the way of session b: it is not a session file (a directory, "
        "a broken link or a special file); move it away or choose another id\n"
    )
    assert not (tmp_path / "nowhere").exists()


def test_verify_of_an_open_turn_does_not_claim_the_writer_stopped(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "o.jsonl").write_text(
        '{"format_version":0,"id":"o","created":1}\n'
        '{"seq":0,"time":1,"type":"turn/start","data":{"turn":1}}\n'
    )
    result = _invoke("verify", "o", "--store", str(store))
    assert result.exit_code == 0
    assert (
        "note: turn 1 is still open at the end of the log (a writer is still running it, or "
        "stopped mid-turn); if none is, resuming the session closes it with interrupted events"
    ) in result.output


def test_a_header_without_format_version_is_not_called_version_none(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "h.jsonl").write_text('{"id":"h","created":1}\n')
    shown = _invoke("show", "h", "--store", str(store))
    assert shown.exit_code == 2
    assert shown.output == (
        f"error: session h ({store / 'h.jsonl'}): line 1: the header has no format_version; "
        "this is not a tapelog session log (its first line must be the header tapelog "
        "writes)\n"
    )
    checked = _invoke("verify", "h", "--store", str(store))
    assert checked.exit_code == 1
    assert "line 1: the header has no format_version" in checked.output


NO_OPENAI_KEY = (
    "error: The openai provider needs an API key: set OPENAI_API_KEY in the environment "
    "(keys are read from the environment only and never logged). "
    "Nothing was sent and no session was stored."
)


@pytest.mark.parametrize("session", [[], ["--session", "fresh"]])
def test_run_without_the_api_key_stores_no_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, session: list[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    store = tmp_path / "store"
    done = subprocess.run(
        [TAPELOG, "run", "hi", "--provider", "openai", "--store", str(store), *session],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [NO_OPENAI_KEY]
    assert done.stdout == ""
    assert _store_files(store) == []


def test_a_resumed_session_without_the_api_key_stays_and_logs_the_failed_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("TAPELOG_PROVIDER", raising=False)
    store = tmp_path / "store"
    first = _invoke("run", "hi", "--tools", "none", "--session", "s", "--store", str(store))
    assert first.exit_code == 0, first.output
    again = _invoke("run", "hi", "--provider", "openai", "--session", "s", "--store", str(store))
    assert again.exit_code == 1
    assert "error: The openai provider needs an API key" in again.output
    assert _store_files(store) == ["s.jsonl"]
    log = (store / "s.jsonl").read_text()
    assert log.count('"type":"turn/start"') == 2
    assert '"kind":"error"' in log
