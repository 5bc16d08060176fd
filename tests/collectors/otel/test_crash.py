"""A receiver killed with SIGKILL in the middle of an intake loses no acknowledged span, at either
SQLite durability level, and the store it leaves is intact and holds whole requests only."""

from __future__ import annotations

import selectors
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tracejudge.store import SqliteStore

SPANS_PER_REQUEST = 40


def _request(make_request: Callable[..., Any], n: int) -> bytes:
    trace = (n + 1).to_bytes(16, "big")
    spans = [
        {
            "trace_id": trace,
            "span_id": (i + 1).to_bytes(8, "big"),
            "name": f"step {i}",
            "start_time_unix_nano": 1_790_000_000_000_000_000 + i,
            "end_time_unix_nano": 1_790_000_000_000_000_100 + i,
            "attributes": {"input.value": f"request {n} " + "context " * 400},
        }
        for i in range(SPANS_PER_REQUEST)
    ]
    data: bytes = make_request(spans).SerializeToString()
    return data


@pytest.mark.parametrize("level", ["normal", "full"])
def test_sigkill_mid_intake_loses_no_acknowledged_span(
    tmp_path: Path, level: str, make_request: Callable[..., Any]
) -> None:
    db = tmp_path / "s.db"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracejudge",
            "--store",
            f"sqlite:///{db}?synchronous={level}",
            "collect",
            "otlp",
            "--listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    acked: list[int] = []
    enough = threading.Event()
    stop = threading.Event()

    def send(url: str) -> None:
        # Requests go out back to back; the receiver is killed while one is being stored.
        with httpx.Client(trust_env=False, timeout=30) as client:
            for n in range(100_000):
                if stop.is_set():
                    return
                try:
                    resp = client.post(
                        url,
                        content=_request(make_request, n),
                        headers={"Content-Type": "application/x-protobuf"},
                    )
                except httpx.HTTPError:
                    return
                if resp.status_code != 200:
                    return
                acked.append(n)
                if len(acked) >= 25:
                    enough.set()

    try:
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(60), "the receiver did not start"
        url = proc.stdout.readline().split()[-1] + "/v1/traces"
        sender = threading.Thread(target=send, args=(url,), daemon=True)
        sender.start()
        assert enough.wait(120), "the receiver acknowledged too few requests"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        stop.set()
    sender.join(timeout=60)

    store = SqliteStore(db)
    try:
        assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for n in acked:
            assert len(store.get_spans(f"{n + 1:032x}")) == SPANS_PER_REQUEST, f"request {n} was acknowledged"
        counts = {t.trace_id: t.span_count for t in store.list_traces()}
        assert set(counts.values()) == {SPANS_PER_REQUEST}  # nothing half-stored
        assert len(counts) >= len(acked)
    finally:
        store.close()
