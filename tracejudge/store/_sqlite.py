"""SQLite store, the embedded default.

Durability (``synchronous``, chosen with ``sqlite:///PATH?synchronous=full|normal``), both in WAL mode:

- ``full`` (the default): each commit fsyncs the WAL before it returns, i.e. before the receiver
  acknowledges, so an acknowledged span survives a crash of the process, of the operating system and
  a power loss.
- ``normal``: the commit does not wait for the disk. A committed transaction -- so every acknowledged
  span -- still survives any crash of the tracejudge process (kill -9, out of memory, an exception):
  it is in the WAL file, which the operating system writes out on its own. Only an operating-system
  crash or a power loss can lose transactions, and only those committed after the last completed
  checkpoint (SQLite syncs the WAL before and the database after each checkpoint): normally the last
  commit or two, never more than the WAL bounds below. The database is never corrupted either way.

Either way a background thread copies committed WAL pages into the database (a checkpoint) after
span commits, so commits do not pay for the copy: at ``normal`` after each commit (the checkpoint is
what puts it on the disk); at ``full`` (where the commit itself did) once the commits pause for
``_PAUSE_S``, or ``_MAX_DEFER_S`` after the first commit not yet copied if they do not, so that a
burst of commits is copied together, after it, instead of the copy's writes and syncs competing with
the commits' syncs for the disk.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Literal, cast

from tracejudge._errors import InputError, StoreError
from tracejudge.store._sql import _SCHEMA_VERSION, _SESSIONS_INDEXED, SqlStore

__all__ = [
    "IMMUTABLE",
    "SqliteStore",
    "Synchronous",
    "copy_wait",
    "has_side_file",
    "read_only_connection",
    "read_only_options",
    "split_options",
]

Synchronous = Literal["full", "normal"]
_SYNCHRONOUS: tuple[Synchronous, ...] = ("full", "normal")
# The writer checkpoints by itself only when the background checkpointer falls this far behind
# (64 MiB, in pages of the store's size); journal_size_limit then truncates the WAL file back after
# a reset.
_WAL_AUTOCHECKPOINT_BYTES = 64 * 1024 * 1024
_JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024
# A WAL longer than this (16 MiB, in frames of one page) is restarted by the checkpointer.
_RESTART_BYTES = 16 * 1024 * 1024
# At synchronous=full, the checkpointer copies once the commits pause this long (seconds), and at the
# latest this long after the first commit it has not copied (bounding the WAL: at ~80 MB/s of commits,
# under the writer's own autocheckpoint above). Commits in a burst (one per export request) rewrite
# some of the same pages -- an index's last leaf, a table's last page -- which a checkpoint per commit
# copied and synced again each time (20 commits of 512 spans, 26 MB: a checkpoint per commit 0.044 s
# of CPU, one per 4 commits 0.031 s, one at the end 0.030 s); and a copy during the burst writes the
# burst again while its commits wait for their syncs: 20 syncs of 1.9 MB took 0.14-0.23 s alone and
# 0.21-0.30 s beside three 11 MB writes and syncs (a stand-in on this machine's disk); the receiver
# wrote 76 MB while taking 10k spans of 2.5 KB (bench_intake's written MB), 43 MB copying after.
_PAUSE_S = 0.05
_MAX_DEFER_S = 0.5


def copy_wait(first: float, last: float, now: float, pause: float, max_defer: float) -> float:
    """Seconds the checkpointer waits before copying, given the monotonic times of the first commit it
    has not copied and of the last commit: until the commits have paused ``pause`` seconds, at most
    until ``max_defer`` after the first; 0: copy now."""
    return max(0.0, min(last + pause, first + max_defer) - now)


# Pages of 4 KiB for a new store (schema 6; 16 KiB from schema 1 to 5, when a row per span of a few KB
# had to fit in its page). A commit logs whole pages, and each new trace's entry in the trace-id index
# lands on a random leaf of it once the store holds more than a few thousand traces: small pages make
# that write 4x smaller. 10k spans in 20 commits into a store of 300,000 traces: 0.142 s of CPU and
# 0.205 s wall at 4 KiB against 0.160 and 0.324 at 16 KiB; into a new store 0.113 / 0.179 against
# 0.106 / 0.193; reading every trace back the same (docs/benchmarks.md). A trace's chunk of spans
# larger than a page continues on overflow pages, appended with it. An existing store keeps its size.
_PAGE_SIZE = 4096


def split_options(path: str) -> tuple[str, Synchronous | None]:
    """``PATH?synchronous=full`` -> (PATH, "full"); a path without options is returned as is."""
    base, sep, query = path.partition("?")
    if not sep:
        return path, None
    sync: Synchronous | None = None
    for part in filter(None, query.split("&")):
        key, _, value = part.partition("=")
        if key != "synchronous" or value.lower() not in _SYNCHRONOUS:
            raise InputError(
                f"unknown SQLite store option {part!r}",
                hint="the one option is synchronous=full (default) or synchronous=normal, e.g. "
                "sqlite:///.tracejudge/tracejudge.db?synchronous=normal",
            )
        sync = cast(Synchronous, value.lower())
    return base, sync


class _Checkpointer:
    """Copies committed WAL pages into the database file on its own connection and thread, so a
    commit does not wait for the copy (sqlite3 releases the GIL while it works)."""

    def __init__(self, path: str, page_size: int, pause_s: float, max_defer_s: float) -> None:
        self._path = path
        self._restart_frames = _RESTART_BYTES // page_size
        self._pause_s = pause_s
        self._max_defer_s = max_defer_s
        self._last_commit = 0.0
        self._wake = threading.Event()
        self._halt = threading.Event()  # set by stop(): ends a wait for more commits
        self._stop = False
        self.checkpoints = 0
        """Checkpoints run so far (for tests)."""
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()

    def poke(self) -> None:
        with self._guard:
            self._last_commit = time.monotonic()
            if self._stop:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        except sqlite3.Error:
            return  # the writer's own autocheckpoint still bounds the WAL
        try:
            conn.execute("PRAGMA busy_timeout=1000")
            while True:
                self._wake.wait()
                first = time.monotonic()
                # Let the commits of a burst collect (what they commit meanwhile is copied too).
                while not self._stop:
                    with self._guard:
                        last = self._last_commit
                    delay = copy_wait(first, last, time.monotonic(), self._pause_s, self._max_defer_s)
                    if delay <= 0:
                        break
                    self._halt.wait(delay)
                self._wake.clear()
                if self._stop:
                    return
                self.checkpoints += 1
                try:
                    # PASSIVE never blocks the writer; what it cannot copy now is copied next time.
                    row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    if row is not None and int(row[1]) > self._restart_frames:
                        # A writer that never pauses never lets the WAL start over, and every page
                        # read then searches a longer WAL index: make the next writer restart it (a
                        # short wait for the writer, as nearly every frame is copied already).
                        conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()
                except sqlite3.Error:
                    continue
        finally:
            conn.close()

    def stop(self) -> None:
        with self._guard:
            self._stop = True
            thread = self._thread
        self._halt.set()
        self._wake.set()
        if thread is not None:
            thread.join(timeout=30)


class SqliteStore(SqlStore):
    """Store on a SQLite file (or ``:memory:``). ``synchronous`` (or ``?synchronous=`` on the path)
    chooses the durability; see the module docstring. ``upgrade=False`` leaves a store at an older
    schema as it is until spans are stored (see :meth:`SqlStore._setup`). ``read_only=True`` opens
    an existing store for the commands that only read: see :func:`read_only_options`."""

    _begin = "BEGIN IMMEDIATE"

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: Synchronous | None = None,
        upgrade: bool = True,
        read_only: bool = False,
    ) -> None:
        raw, from_path = split_options(str(path)) if isinstance(path, str) else (str(path), None)
        self.path = raw
        self.synchronous: Synchronous = synchronous or from_path or "full"
        self._checkpointer: _Checkpointer | None = None
        self.read_only = read_only
        self._query_only = False  # opened read-write with query_only (a folder it can write)
        """Opened to read only (``query_only``, or ``mode=ro``): every write fails."""
        if read_only:
            self._open_read_only()
            return
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA busy_timeout=30000")
            # Only a new (empty) file takes the page size; an existing store keeps its own.
            conn.execute(f"PRAGMA page_size={_PAGE_SIZE}")
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode=WAL")
                page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
                conn.execute(f"PRAGMA wal_autocheckpoint={_WAL_AUTOCHECKPOINT_BYTES // page_size}")
                conn.execute(f"PRAGMA journal_size_limit={_JOURNAL_SIZE_LIMIT}")
                full = self.synchronous == "full"
                self._checkpointer = _Checkpointer(
                    self.path, page_size, _PAUSE_S if full else 0.0, _MAX_DEFER_S if full else 0.0
                )
            # See the module docstring for what each level guarantees.
            conn.execute(f"PRAGMA synchronous={self.synchronous.upper()}")
            super().__init__(conn, self.path)
            self._setup(upgrade=upgrade)
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"cannot open the store {self.path}: {exc}",
                hint="check the path given with --store / TRACEJUDGE_STORE is a tracejudge SQLite file",
            ) from exc

    def _open_read_only(self) -> None:
        """Open the existing store without creating, upgrading or writing anything (no table set-up:
        the schema version is read, and a store at an older one is read as it is)."""
        try:
            conn = read_only_connection(Path(self.path))
            self._query_only = bool(conn.execute("PRAGMA query_only").fetchone()[0])
            super().__init__(conn, self.path)
            with self._lock:
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if "schema_info" not in tables:
                    raise sqlite3.DatabaseError("it has no tracejudge tables")
                self._schema = self._stored_schema()
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot read the store {self.path}: {exc}",
                hint="check the path given with --store / TRACEJUDGE_STORE is a tracejudge SQLite file",
            ) from exc
        if self._schema > _SCHEMA_VERSION:
            conn.close()
            raise StoreError(
                f"the store {self.label} has schema version {self._schema}, newer than this tracejudge knows",
                hint="upgrade tracejudge, or point --store at another store",
            )

    def _index_sessions(self) -> None:
        """A store from before the sessions index is indexed on its first session read — a write. A
        read-only store lifts ``query_only`` for it where it can write (as it did before it read only),
        and says what to do where it cannot, rather than read a conversation with turns left out."""
        if not self.read_only or self._sessions_indexed:
            return super()._index_sessions()
        if self.get_meta(_SESSIONS_INDEXED) is not None:
            self._sessions_indexed = True
            return None
        if not self._query_only:
            raise StoreError(
                f"the store {self.label} has not indexed its sessions yet and cannot be written here",
                hint="run this command once where the store's folder can be written (it indexes them)",
            )
        with self._lock:
            self._execute("PRAGMA query_only=0")
        try:
            return super()._index_sessions()
        finally:
            with self._lock:
                self._execute("PRAGMA query_only=1")

    def _committed_spans(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.poke()

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        super().close()


def has_side_file(path: Path) -> bool:
    """Whether a -wal or -journal file lies beside the SQLite file at ``path``: a process that can write
    the store has it open (or left a transaction behind), so a read goes through SQLite's locks."""
    return any(path.with_name(path.name + suffix).exists() for suffix in ("-wal", "-journal"))


def read_only_options(path: Path) -> str:
    """How to open the store at ``path`` to only read it (the URI options), adding no file beside it that
    outlives the read, in a folder this process may not be able to write (a read-only mount, a backup
    copy). The one policy of every read that must change nothing: the read-only store
    (:func:`read_only_connection`) and ``doctor`` (``store._inspect``).

    - Folder and file writable: ``mode=rw``, an ordinary connection with ``query_only`` (SQLite refuses
      every write through it). Not ``mode=ro``: every WAL reader needs the -wal and -shm files, which a
      ``mode=ro`` connection creates but cannot remove on close (it cannot checkpoint), so they were
      left beside the store; an ordinary connection that closes last checkpoints and removes them, as
      the receiver's does. It reads through SQLite's locks, so a receiver writing the store meanwhile
      is read consistently (each read a committed snapshot, the WAL's latest commits included).
    - Not writable, with a -wal (or -journal) beside the store: ``mode=ro``, through the locks and
      the side files that are there already (a process that can write the folder has it open).
    - Not writable and no side file: ``immutable=1``, the file alone without locks (``mode=ro`` cannot
      open a WAL store there: it cannot create the -shm). No process of ours can be writing it: a
      writer in WAL mode would have made a -wal beside it. Only a process with more rights starting to
      write it while the read is open could be missed, which a folder we cannot write does not see in
      the cases this is for (a read-only mount, a backup); a reader that reads once can also check the
      file did not change under it (``doctor`` does)."""
    if os.access(path.parent, os.W_OK) and os.access(path, os.W_OK):
        return "mode=rw"  # read-write but never create: a store removed meanwhile is not made anew
    if has_side_file(path):
        return "mode=ro"
    return IMMUTABLE


# The options of a read of the file alone, without SQLite's locks (:func:`read_only_options`).
IMMUTABLE = "mode=ro&immutable=1"


def read_only_connection(path: Path, options: str | None = None) -> sqlite3.Connection:
    """A connection that only reads the store at ``path``, opened with ``options`` (by default
    :func:`read_only_options`'s)."""
    options = options or read_only_options(path)
    uri = f"{path.resolve().as_uri()}?{options}"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
    if options == "mode=rw":
        conn.execute("PRAGMA query_only=1")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn
