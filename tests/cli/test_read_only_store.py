"""The commands that only read (``traces list``/``show``, ``report``, ``serve``, ``regress build``)
open an existing SQLite store read-only: they work in a folder they cannot write (a read-only mount,
a backup copy) and leave no file beside the store, and a receiver writing the store meanwhile is read
as it commits.

A read-only folder does not stop root (the tests run as root in CI): there the commands run without
the capabilities that let root write where the folder's mode says no (CAP_DAC_OVERRIDE and
CAP_DAC_READ_SEARCH, dropped from the child's bounding set before it starts), so the folder's mode
stops them as it stops any other user."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from tracejudge.cli import cli
from tracejudge.schema import Localization, RawSpan, StageResult
from tracejudge.store import SqliteStore

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
LATER = "4bf92f3577b34da6a3ce929d0e0e9999"


def _span(trace_id: str, name: str) -> RawSpan:
    return RawSpan(
        trace_id=trace_id,
        span_id="00f067aa0ba902b7",
        name=name,
        start_time_unix_nano=1_700_000_000_000_000_000,
        end_time_unix_nano=1_700_000_000_100_000_000,
    )


def _fill(store: SqliteStore) -> None:
    store.put_spans([_span(TRACE, "answer the question")])
    store.put_triage_result(
        Localization(
            ticket="EXP-1",
            trace_id=TRACE,
            task_time=None,
            verdict="unconfirmed",
            stages=(StageResult(name="indexed", status="unconfirmed", missing=("manifest",)),),
        )
    )


def _without_root_rights() -> None:
    """In the child before it starts the command: give up root's rights over file modes."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "cannot drop a capability")


def _as_other_user() -> dict[str, Any]:
    """subprocess options under which the folder's mode applies to the command."""
    return {"preexec_fn": _without_root_rights} if os.geteuid() == 0 else {}


def _tracejudge(db: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "NO_COLOR": "1"}
    env.pop("TRACEJUDGE_STORE", None)
    return subprocess.run(
        [sys.executable, "-m", "tracejudge", "--store", f"sqlite:///{db}", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
        **_as_other_user(),
    )


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_reading_commands_read_a_store_in_a_folder_they_cannot_write(tmp_path: Path) -> None:
    """They opened the store to write (its tables set up in a write transaction) and failed there:
    SQLite could not make the WAL beside it."""
    folder = tmp_path / "store"
    folder.mkdir()
    db = folder / "t.db"
    store = SqliteStore(db)
    _fill(store)
    store.close()  # the last connection's close checkpoints the WAL into the file and removes it
    before = _files(folder)
    assert set(before) == {"t.db"}
    out = tmp_path / "out"
    out.mkdir()
    folder.chmod(0o555)
    db.chmod(0o444)

    listed = _tracejudge(db, "traces", "list", "--json", home=out)
    assert listed.returncode == 0, listed.stderr
    assert [t["trace_id"] for t in json.loads(listed.stdout)] == [TRACE]
    shown = _tracejudge(db, "traces", "show", TRACE[:8], "--json", home=out)
    assert shown.returncode == 0, shown.stderr
    assert TRACE in shown.stdout
    report = _tracejudge(db, "report", "--out", str(out / "r.html"), "--json", home=out)
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["tickets"] == 1
    assert "EXP-1" in (out / "r.html").read_text()

    ticket = out / "ticket.yaml"
    ticket.write_text(json.dumps({"trace_id": TRACE, "required": [{"doc_id": "D"}]}), encoding="utf-8")
    built = _tracejudge(
        db, "regress", "build", "--ticket", str(ticket), "--out", str(out / "suite"), "--json", home=out
    )
    assert built.returncode == 0, built.stderr
    assert {"written", "skipped"} <= set(json.loads(built.stdout))

    env = {**os.environ, "HOME": str(out)}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracejudge",
            "--store",
            f"sqlite:///{db}",
            "serve",
            "--listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **_as_other_user(),
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("listening on "), line + server.stderr.read() if server.stderr else line
        page = httpx.get(line.removeprefix("listening on ").strip() + "/", timeout=30)
        assert page.status_code == 200
        assert "EXP-1" in page.text
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert _files(folder) == before


def test_a_store_a_receiver_has_open_in_a_folder_the_reader_cannot_write(tmp_path: Path) -> None:
    """While a receiver has the store open its latest commits may be only in the -wal: read through
    SQLite's locks (not the file alone), with the side files that are there already."""
    folder = tmp_path / "store"
    folder.mkdir()
    db = folder / "t.db"
    out = tmp_path / "out"
    out.mkdir()
    store = SqliteStore(db)
    try:
        store.put_spans([_span(TRACE, "first")])
        folder.chmod(0o555)  # the receiver (root, or this user) keeps writing: its files are open
        store.put_spans([_span(LATER, "second")])
        names = sorted(p.name for p in folder.iterdir())
        assert "t.db-wal" in names
        listed = _tracejudge(db, "traces", "list", "--json", home=out)
        assert listed.returncode == 0, listed.stderr
        assert {t["trace_id"] for t in json.loads(listed.stdout)} == {TRACE, LATER}
        assert sorted(p.name for p in folder.iterdir()) == names
    finally:
        folder.chmod(0o755)
        store.close()
    assert sorted(p.name for p in folder.iterdir()) == ["t.db"]


def test_a_reader_beside_a_writer_sees_each_commit_and_leaves_no_file(tmp_path: Path) -> None:
    """In a folder it can write, a reading command reads through SQLite's locks (each read a committed
    snapshot, the WAL's latest commits included), writes nothing, and leaves no -wal/-shm behind: a
    mode=ro connection made them and could not remove them."""
    db = tmp_path / "store" / "t.db"
    store = SqliteStore(db)
    store.put_spans([_span(TRACE, "first")])
    store.close()

    def listed() -> set[str]:
        result = CliRunner().invoke(cli, ["--store", f"sqlite:///{db}", "traces", "list", "--json"])
        assert result.exit_code == 0, result.output
        return {t["trace_id"] for t in json.loads(result.stdout)}

    assert listed() == {TRACE}
    assert sorted(p.name for p in db.parent.iterdir()) == ["t.db"]
    writer = SqliteStore(db)
    try:
        writer.put_spans([_span(LATER, "second")])
        names = sorted(p.name for p in db.parent.iterdir())
        assert listed() == {TRACE, LATER}
        assert sorted(p.name for p in db.parent.iterdir()) == names
        writer.put_spans([_span("4bf92f3577b34da6a3ce929d0e0e0001", "third")])  # the writer is unharmed
    finally:
        writer.close()
    assert sorted(p.name for p in db.parent.iterdir()) == ["t.db"]
    assert len(listed()) == 3


def test_a_read_only_store_refuses_writes(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    SqliteStore(db).close()
    reader = SqliteStore(db, read_only=True)
    try:
        with pytest.raises(Exception, match="readonly"):
            reader.put_spans([_span(TRACE, "x")])
    finally:
        reader.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.db"]


def _unindexed_store(db: Path) -> None:
    """A store from before the sessions index: two turns of one conversation, not indexed yet."""
    store = SqliteStore(db)
    store.put_spans(
        [RawSpan(trace_id=TRACE, span_id="00f067aa0ba902b7", name="turn 1", attributes={"session.id": "s"})]
    )
    store.put_spans(
        [RawSpan(trace_id=LATER, span_id="00f067aa0ba902b8", name="turn 2", attributes={"session.id": "s"})]
    )
    with store._lock:
        store._execute("DELETE FROM meta WHERE key = 'index:sessions'", ())
        store._execute("DELETE FROM trace_sessions", ())
    store.close()


def test_a_store_from_before_the_sessions_index_is_indexed_where_it_can_be_written(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    _unindexed_store(db)
    reader = SqliteStore(db, read_only=True)
    try:
        assert {t.trace_id for t in reader.session_traces("s")} == {TRACE, LATER}
        with pytest.raises(Exception, match="readonly"):  # and read-only again after
            reader.put_spans([_span("4bf92f3577b34da6a3ce929d0e0e0001", "x")])
    finally:
        reader.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.db"]


def test_a_store_from_before_the_sessions_index_in_a_read_only_folder_says_so(tmp_path: Path) -> None:
    """Where the index cannot be written the conversation is not read with its turns left out."""
    folder = tmp_path / "store"
    folder.mkdir()
    db = folder / "t.db"
    _unindexed_store(db)
    folder.chmod(0o555)
    db.chmod(0o444)
    try:
        result = _tracejudge(db, "traces", "show", "--session", "s", "--json", home=tmp_path)
    finally:
        folder.chmod(0o755)
    assert result.returncode != 0
    assert "has not indexed its sessions yet" in result.stderr, result.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["t.db"]
