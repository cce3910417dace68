"""The cache audit's checkpoint beside a JSONL log (tapelog.audit._checkpoint):
the same output with and without it, read alone when it names the log's bytes,
resumed from when they extend its bytes, ignored and rebuilt otherwise."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from audit._growing import AuditCounter
from audit._sessions import LogBuilder
from tapelog.audit import cache_report
from tapelog.cli import cli
from tapelog.log import decode, encode
from tapelog.log._api import Session
from tapelog.store import JsonlStore


def _session() -> Session:
    """A log whose audit has rows with causes of several kinds (detail objects, seq lists)."""
    log = LogBuilder()
    log.user("Shout twice.")
    first = log.tool_round("c1", "x" * 1000, header=True)
    second = log.tool_round("c2", "y" * 1000)
    log.answer("Done.")
    log.user("Again?")
    trims = [log.trim(first), log.trim(second)]
    log.answer("Trimmed.")
    log.user("Summarise.")
    log.compact("c7", 1, trims[1].seq)
    log.answer("Compacted.")
    return log.session


def _store(root: Path, session: Session) -> Path:
    store = JsonlStore(root)
    with store.create(session) as writer:
        writer.flush()
    return store.path(session.id)


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), obj={"debug": False})
    return result.exit_code, result.stdout, result.stderr


def _outputs(root: Path, sid: str) -> tuple[str, str]:
    """``tapelog cache`` as JSON, then as the table and its sentences."""
    code, as_json, _ = _run("cache", sid, "--store", str(root), "--json")
    assert code == 0
    code, text, _ = _run("cache", sid, "--store", str(root))
    assert code == 0
    return as_json, text


_REQUESTS = 5  # in _session()


def test_a_checkpoint_is_written_and_gives_the_same_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _session()
    log = _store(tmp_path, session)
    audits = AuditCounter(monkeypatch)
    first = _outputs(tmp_path, session.id)  # writes the checkpoint
    assert audits.count == _REQUESTS
    checkpoint = log.with_suffix(".audit")
    assert checkpoint.is_file()
    second = _outputs(tmp_path, session.id)  # reads it
    assert audits.count == _REQUESTS
    assert second == first
    assert "trim 2 results" in first[1]
    assert "compaction c7" in first[1]
    checkpoint.unlink()
    assert _outputs(tmp_path, session.id) == first  # and without it
    assert audits.count == 2 * _REQUESTS


def test_a_checkpoint_of_a_shorter_log_is_resumed_from_and_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _session()
    log = _store(tmp_path, session)
    _outputs(tmp_path, session.id)
    stale = log.with_suffix(".audit").read_bytes()
    grown = JsonlStore(tmp_path)
    resumed, writer = grown.open(session.id)
    with writer:
        builder = LogBuilder()
        builder.session = resumed
        builder.turn, builder.step = 3, 0
        builder.user("More.")
        builder.answer("Yes.")
        writer.flush()
    audits = AuditCounter(monkeypatch)
    after = _outputs(tmp_path, session.id)
    # Resumed after the fourth request: the last one covered again, and the new one.
    assert audits.count == 2
    assert log.with_suffix(".audit").read_bytes() != stale  # rewritten
    assert len(decode(after[0])["requests"]) == 6
    log.with_suffix(".audit").unlink()
    assert _outputs(tmp_path, session.id) == after


@pytest.mark.parametrize(
    "forge",
    [
        "a row changed, its digest kept",
        "another log's digest",
        "another tapelog version",
        "not JSON",
        "a row without its fields",
        "a row with a field rows do not have",
        "a body digest not of hex",
        "a body digest of request 0",
    ],
)
def test_a_forged_or_damaged_checkpoint_is_ignored_and_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forge: str
) -> None:
    session = _session()
    log = _store(tmp_path, session)
    truth = _outputs(tmp_path, session.id)
    checkpoint = log.with_suffix(".audit")
    original = checkpoint.read_bytes()
    head_line, rows_line, state_line, _ = original.split(b"\n")
    head, body = decode(head_line), decode(rows_line)
    if forge == "a row changed, its digest kept":
        body["rows"][0]["cached_reported"] += 1
    elif forge == "another log's digest":
        head["log"]["sha256"] = "0" * 64
    elif forge == "another tapelog version":
        head["tapelog"] = "0.0.0"
    elif forge == "a row without its fields":
        del body["rows"][0]["rule"]
    elif forge == "a row with a field rows do not have":
        body["rows"][0]["surprise"] = 1
    elif forge == "a body digest not of hex":
        body["bodies"][0][2] = "Z" * 64
    elif forge == "a body digest of request 0":
        body["bodies"][0][0] = 0
    if forge in (
        "a row without its fields",
        "a row with a field rows do not have",
        "a body digest not of hex",
        "a body digest of request 0",
    ):
        head["rows_sha256"] = hashlib.sha256(encode(body)).hexdigest()  # a consistent forgery
    forged = b"\n".join([encode(head), encode(body), state_line, b""])
    checkpoint.write_bytes(b"{not json" if forge == "not JSON" else forged)
    audits = AuditCounter(monkeypatch)
    assert _outputs(tmp_path, session.id) == truth
    # The JSON run audited it all; the table run used the rebuilt one.
    assert audits.count == _REQUESTS
    assert checkpoint.read_bytes() == original  # rebuilt, byte for byte


def test_a_session_file_gets_its_checkpoint_beside_it(tmp_path: Path) -> None:
    session = _session()
    log = _store(tmp_path / "store", session)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(log.read_bytes())
    code, out, _ = _run("cache", str(copy), "--json")
    assert code == 0
    assert (tmp_path / "copy.audit").is_file()
    assert _run("cache", str(copy), "--json")[1] == out


def test_the_warnings_of_the_load_are_printed_from_the_checkpoint(tmp_path: Path) -> None:
    session = _session()
    log = _store(tmp_path, session)
    with log.open("ab") as f:
        f.write(b'{"seq": 99, "torn')  # a torn final line: dropped with a warning
    first = _run("cache", session.id, "--store", str(tmp_path), "--json")
    assert first[0] == 0
    assert "line 37" in first[2]  # the dropped line, named
    assert log.with_suffix(".audit").is_file()
    assert _run("cache", session.id, "--store", str(tmp_path), "--json") == first


async def test_a_real_loop_session_reads_the_same_from_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A header-delta cause (its detail holds lists of tool names) and usage
    from a real agent run on the emulator, with digests in the log."""
    from audit.test_audit_cli import _stored

    sid = await _stored(tmp_path)
    first = _outputs(tmp_path, sid)
    assert "drop: tools +shout" in first[1]
    audits = AuditCounter(monkeypatch)
    assert _outputs(tmp_path, sid) == first
    assert audits.count == 0


def test_the_checkpoint_is_owner_only_and_never_written_through_a_link(tmp_path: Path) -> None:
    session = _session()
    log = _store(tmp_path, session)
    checkpoint = log.with_suffix(".audit")
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"keep me")
    checkpoint.symlink_to(victim)  # a link planted where the checkpoint goes
    _outputs(tmp_path, session.id)
    assert victim.read_bytes() == b"keep me"
    assert not checkpoint.is_symlink()
    assert checkpoint.stat().st_mode & 0o777 == 0o600
    assert not list(tmp_path.glob(".*.tmp"))
    assert [s.id for s in JsonlStore(tmp_path).list()] == [session.id]


def test_a_checkpoint_copied_with_its_log_elsewhere_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load's warnings name the path it read, so a checkpoint is read
    without loading only at its own path; elsewhere the log is loaded (its
    warnings are its own) and the audit resumed, as for a log that grew."""
    session = _session()
    log = _store(tmp_path / "a", session)
    first = _run("cache", session.id, "--store", str(tmp_path / "a"), "--json")
    moved = tmp_path / "b"
    moved.mkdir()
    for name in (log.name, log.with_suffix(".audit").name):
        (moved / name).write_bytes((log.parent / name).read_bytes())
    audits = AuditCounter(monkeypatch)
    assert _run("cache", session.id, "--store", str(moved), "--json") == first
    assert audits.count == 1  # the last request, from the state before it


def test_report_takes_the_audit_from_the_checkpoint_and_writes_the_same_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _session()
    log = _store(tmp_path, session)
    pages = []
    for name in ("first.html", "second.html"):
        out = tmp_path / name
        code, _, _ = _run("report", session.id, "--store", str(tmp_path), "-o", str(out))
        assert code == 0
        pages.append(out.read_bytes())
        if name == "first.html":  # written by the first run, read by the second
            assert log.with_suffix(".audit").is_file()
            audits = AuditCounter(monkeypatch)
    assert audits.count == 0
    assert pages[0] == pages[1]


def test_serve_takes_the_audit_of_the_log_as_loaded_from_a_matching_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tapelog.serve._live import LiveSession

    session = _session()
    _store(tmp_path, session)
    fresh = LiveSession(JsonlStore(tmp_path), session.id).audit()
    _outputs(tmp_path, session.id)  # leaves the checkpoint
    audits = AuditCounter(monkeypatch)
    live = LiveSession(JsonlStore(tmp_path), session.id)
    assert live.audit().to_json() == fresh.to_json()
    assert audits.count == 0
    # A log that grew since resumes from the checkpoint.
    grown, writer = JsonlStore(tmp_path).open(session.id)
    with writer:
        builder = LogBuilder()
        builder.session = grown
        builder.turn = 3
        builder.user("More.")
        builder.answer("Yes.")
        writer.flush()
    live = LiveSession(JsonlStore(tmp_path), session.id)
    audit = live.audit()
    assert len(audit.requests) == len(fresh.requests) + 1
    assert audits.count == 2  # the last request covered, and the new one
    assert audit.to_json() == cache_report(JsonlStore(tmp_path).load(session.id).session).to_json()


def test_a_row_with_every_field_set_reads_back_from_its_checkpoint_form() -> None:
    """What the checkpoint keeps of a row gives the row back: the provider's verdict
    (beside the request's provider), the tokens lost, a derived count left out."""
    from dataclasses import replace

    from tapelog.audit._cache_report import CacheCause, RequestCache
    from tapelog.audit._checkpoint import _row, _row_json

    row = RequestCache(
        index=2,
        turn=2,
        step=1,
        seq=40,
        provider="anthropic",
        model="claude",
        rule="anthropic",
        prompt_tokens=5000,
        cached_reported=1200,
        cached_expected=1024,
        shared_prefix_tokens=1024,
        drop=True,
        causes=(CacheCause(kind="header-delta", seqs=(39,), detail={"tools": ["~x"]}),),
        usage_logged=True,
        provider_verdict="tools_changed",
        provider_agrees=True,
        lost_tokens=3000,
    )
    assert _row(_row_json(row)) == row
    plain = replace(row, provider_verdict=None, provider_agrees=None)
    assert _row(_row_json(plain)) == plain
