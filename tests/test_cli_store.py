"""tapelog verify / show / sessions, through click and through the real console script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tapelog import EpochHeader, LlmCallConfig, Session
from tapelog.cli import cli
from tapelog.log import decode, encode
from tapelog.store import JsonlStore

TAPELOG = Path(sys.executable).parent / "tapelog"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), obj={"debug": False})


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


def chat(session_id: str, *, created: int = 1_700_000_000_000, closed: bool = True) -> Session:
    """One turn, one request with a streamed answer, plus a second header as a delta."""
    s = Session(session_id, created=created, clock=lambda: created + 1_500)
    header = EpochHeader(config=LlmCallConfig(provider="emulator", model="echo"), system="Be kind.")
    s.append("request/header", {"header": header.to_json(), "reason": "initial"})
    s.append("turn/start", {"turn": 0})
    s.append(
        "user/message",
        {"content": [{"type": "text", "text": "hello [bold]there[/]"}], "source": {"kind": "user"}},
        surface_op="append",
    )
    s.append("step/start", {"turn": 0, "step": 0})
    for piece in ("Hi", " you", "!"):
        s.append(
            "assistant/chunk", {"turn": 0, "step": 0, "chunk": {"kind": "text", "text": piece}}
        )
    s.append(
        "assistant/message",
        {
            "turn": 0,
            "step": 0,
            "content": [{"type": "text", "text": "Hi you!"}],
            "source": {"provider": "emulator", "model": "echo"},
        },
        surface_op="append",
    )
    if closed:
        s.append("step/end", {"turn": 0, "step": 0})
        s.append(
            "request/header-delta",
            {"system": {"keep_start": 0, "keep_end": 0, "insert": ["Be brief."]}},
        )
        s.append("turn/end", {"turn": 0, "reason": {"kind": "completed"}})
    return s


def save(root: Path, session: Session) -> Path:
    store = JsonlStore(root)
    with store.create(session):
        pass
    return store.path(session.id)


# --- verify ------------------------------------------------------------------


def test_verify_valid_session(root: Path) -> None:
    save(root, chat("s1"))
    result = run("verify", "s1", "--store", str(root))
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "ok: s1: 11 events, 1 turn, 1 request, 1 header snapshot, 1 header delta\n"
    )


def test_verify_a_path_outside_the_store(tmp_path: Path, root: Path) -> None:
    copy = tmp_path / "elsewhere.jsonl"
    copy.write_bytes(save(root, chat("s2")).read_bytes())
    result = run("verify", str(copy))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"ok: {copy}: 11 events")


def test_verify_torn_tail_is_a_warning(root: Path) -> None:
    path = save(root, chat("torn"))
    with path.open("ab") as f:
        f.write(b'{"seq":11,')
    result = run("verify", "torn", "--store", str(root))
    assert result.exit_code == 0, result.output
    assert "warning: line 13: dropped an incomplete final line (10 bytes" in result.stderr
    assert result.stdout.startswith("ok: torn: 11 events")


def test_verify_open_turn_is_a_note(root: Path) -> None:
    save(root, chat("open", closed=False))
    result = run("verify", "open", "--store", str(root))
    assert result.exit_code == 0, result.output
    assert "note: turn 0 is still open at the end of the log" in result.stdout
    assert "resuming the session closes it with interrupted events" in result.stdout


def test_verify_lists_every_problem_with_line_and_seq(root: Path) -> None:
    path = save(root, chat("bad"))
    lines = path.read_bytes().split(b"\n")
    lines[2] = encode({"seq": 1, "time": 5, "type": "turn/start", "data": {}})  # payload
    lines[5] = lines[5][:30]  # not JSON
    lines[8] = lines[8].replace(b'"assistant/message"', b'"assistant/thought"')
    lines[9] = lines[9].replace(b'"time"', b'"\\u0074ime"')  # valid JSON, not canonical
    path.write_bytes(b"\n".join(lines))
    result = run("verify", "bad", "--store", str(root))
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines() == [
        "  line 3 (seq 1): turn/start: data.turn is required",
        "  line 6 (seq 4): not valid JSON (unexpected end of data: line 1 column 31 (char 30))",
        "  line 9 (seq 7): unknown event type 'assistant/thought'; this version of tapelog "
        "reads format version 0 types only",
        "  line 10 (seq 8): the line is not in canonical form (it was not written by "
        "tapelog's encoder, or it was edited)",
        "bad: invalid (4 problems)",
    ]


def test_verify_accepts_a_log_written_with_other_whitespace_with_a_warning(root: Path) -> None:
    path = save(root, chat("spaced"))
    lines = path.read_bytes().split(b"\n")
    # what json.dumps writes by default: ", " and ": " between tokens
    spaced = [line.replace(b'","', b'", "').replace(b'":', b'": ') for line in lines[:4]]
    path.write_bytes(b"\n".join(spaced + lines[4:]))
    result = run("verify", "spaced", "--store", str(root))
    assert result.exit_code == 0, result.output
    assert "4 lines (first: line 1) differ from tapelog's canonical bytes only by whitespace" in (
        result.output
    )


def test_verify_other_format_version_is_invalid(tmp_path: Path) -> None:
    path = tmp_path / "v1.jsonl"
    path.write_bytes(encode({"format_version": 1, "id": "v1", "created": 1}) + b"\n")
    result = run("verify", str(path))
    assert result.exit_code == 1
    assert "line 1: the session is stored in format version 1" in result.stdout


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("ghost", "error: no session ghost in the store at"),
        ("bad id", "error: invalid session id 'bad id': it contains the character ' '"),
        ("nowhere/x.jsonl", "error: no session file at nowhere/x.jsonl; check the path"),
    ],
)
def test_verify_usage_and_io_errors_exit_2(root: Path, target: str, message: str) -> None:
    result = run("verify", target, "--store", str(root))
    assert result.exit_code == 2
    assert result.stderr.startswith(message)
    assert "Traceback" not in result.output


# --- show --------------------------------------------------------------------


def test_show_timeline_folds_chunks(root: Path) -> None:
    save(root, chat("tl"))
    result = run("show", "tl", "--store", str(root))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "session tl · created 2023-11-14 22:13:20 UTC" in out
    assert "hello [bold]there[/]" in out  # user text is not read as markup
    assert "assistant/chunk ×3" in out
    assert "4-6" in out
    assert "text 3" in out
    assert "emulator/echo: Hi you!" in out
    assert "initial · emulator/echo · 0 tools" in out
    assert "changes system" in out
    assert "turn 0 · completed" in out
    assert "22:13:21.500" in out


def test_show_with_chunks_lists_each(root: Path) -> None:
    save(root, chat("tl2"))
    result = run("show", "tl2", "--store", str(root), "--chunks")
    assert result.exit_code == 0, result.output
    assert "×" not in result.stdout
    assert result.stdout.count("assistant/chunk") == 3
    assert '{"kind":"text","text":" you"}' in result.stdout


def test_show_corrupt_session_is_one_error_line(root: Path) -> None:
    path = save(root, chat("broken"))
    path.write_bytes(path.read_bytes().replace(b'"turn/start"', b'"turn/begin"'))
    result = run("show", "broken", "--store", str(root))
    assert result.exit_code == 2
    assert "unknown event type 'turn/begin'" in result.stderr
    assert "line 3 (seq 1)" in result.stderr


# --- sessions ----------------------------------------------------------------


def test_sessions_newest_first_and_json(root: Path) -> None:
    save(root, chat("older", created=1_700_000_000_000))
    parent = chat("newer", created=1_800_000_000_000)
    save(root, parent)
    save(root, parent.fork(10, id="fork"))
    table = run("sessions", "--store", str(root))
    assert table.exit_code == 0, table.output
    rows = [line for line in table.stdout.splitlines() if line.startswith("│")]
    # newest first, but a fork (created after its parent) is listed under it
    assert [row.split("│")[1].strip() for row in rows] == ["newer", "└ fork", "older"]
    assert "2023-11-14 22:13:20" in table.stdout
    as_json = run("sessions", "--store", str(root), "--json")
    assert as_json.exit_code == 0
    listed = decode(as_json.stdout)
    by_id = {item["id"]: item for item in listed}
    assert by_id["older"]["events"] == 11
    assert by_id["older"]["created"] == 1_700_000_000_000
    assert by_id["older"]["last_time"] == 1_700_000_001_500
    assert by_id["fork"]["parent"] == "newer"
    assert by_id["fork"]["events"] == 12
    assert list(by_id["older"]) == [
        "id",
        "created",
        "parent",
        "events",
        "last_time",
        "size",
        "error",
        "status",
        "provider",
        "model",
        "requests",
        "prompt_tokens",
        "cached_tokens",
        "hit_ratio",
        "efficiency",
        "lost_tokens",
        "bottom_line",
    ]
    assert (by_id["older"]["provider"], by_id["older"]["model"]) == ("emulator", "echo")
    assert by_id["older"]["status"] == "ended"
    assert by_id["older"]["error"] is None
    assert by_id["older"]["lost_tokens"] == 0


def test_sessions_lists_a_session_with_a_damaged_middle_line_as_damaged(root: Path) -> None:
    save(root, chat("fine", created=1_700_000_000_000))
    path = save(root, chat("cut", created=1_800_000_000_000))
    lines = path.read_bytes().split(b"\n")
    lines[4] = lines[4][: len(lines[4]) // 2]  # a middle line cut short
    path.write_bytes(b"\n".join(lines))
    listed = {r["id"]: r for r in decode(run("sessions", "--store", str(root), "--json").stdout)}
    assert listed["fine"]["error"] is None
    assert listed["cut"]["error"]
    assert listed["cut"]["status"] == "damaged"
    table = run("sessions", "--store", str(root))
    assert table.exit_code == 0
    row = next(line for line in table.stdout.splitlines() if line.startswith("│ cut"))
    assert "damaged" in row


def test_sessions_columns_bottom_line_and_sort(root: Path) -> None:
    save(root, chat("older", created=1_700_000_000_000))
    save(root, chat("newer", created=1_800_000_000_000))
    table = run("sessions", "--store", str(root))
    assert table.exit_code == 0, table.output
    first = table.stdout.splitlines()[0]
    assert first == (
        "No prompt tokens paid at full price that the cache could have served, in 2 audited "
        "sessions."
    )
    header = next(line for line in table.stdout.splitlines() if "provider / model" in line)
    for column in ("provider / model", "hit", "efficiency", "lost tok", "status"):
        assert column in header
    by_id = run("sessions", "--store", str(root), "--json", "--sort", "id")
    assert [r["id"] for r in decode(by_id.stdout)] == ["newer", "older"]
    bad = run("sessions", "--store", str(root), "--sort", "nonsense")
    assert bad.exit_code == 2


def test_sessions_of_a_store_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    result = run("sessions", "--store", str(missing))
    assert result.exit_code == 2
    assert result.stderr == f"error: no store at {missing}: the directory does not exist\n"
    assert not missing.exists()


def test_sessions_empty_store(root: Path) -> None:
    root.mkdir()
    result = run("sessions", "--store", str(root))
    assert result.exit_code == 0
    assert result.stdout == f"no sessions in {root}\n"
    assert run("sessions", "--store", str(root), "--json").stdout == "[]\n"


# --- the real console script ---------------------------------------------------


def test_console_script_exit_codes_without_tracebacks(root: Path) -> None:
    path = save(root, chat("real"))
    ok = subprocess.run(
        [str(TAPELOG), "verify", "real", "--store", str(root)], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("ok: real: 11 events")
    path.write_bytes(path.read_bytes()[:-40] + b"\n")
    bad = subprocess.run([str(TAPELOG), "verify", str(path)], capture_output=True, text=True)
    assert bad.returncode == 1
    assert "line 12 (seq 10): not valid JSON" in bad.stdout
    missing = subprocess.run(
        [str(TAPELOG), "show", "ghost", "--store", str(root)], capture_output=True, text=True
    )
    assert missing.returncode == 2
    assert missing.stderr.startswith("error: no session ghost in the store at")
    for proc in (ok, bad, missing):
        assert "Traceback" not in proc.stdout + proc.stderr
