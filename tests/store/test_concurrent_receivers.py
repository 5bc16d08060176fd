"""Four receiver processes on one PostgreSQL take overlapping span sets at once, with no global lock:
no deadlock, no span lost or stored twice, and every trace summary right."""

from __future__ import annotations

import random
import selectors
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from tests.collectors.otel.conftest import build_request
from tracejudge.store import open_store

RECEIVERS = 4
TRACES = 30
SPANS_PER_TRACE = 24
BASE_NS = 1_790_000_000_000_000_000


def _span(t: int, s: int) -> dict[str, Any]:
    rng = random.Random(t * 1000 + s)
    start = BASE_NS + t * 10_000_000 + rng.randrange(1_000_000)
    span: dict[str, Any] = {
        "trace_id": (t + 1).to_bytes(16, "big"),
        "span_id": (s + 1).to_bytes(8, "big"),
        "name": "root" if s == 0 else f"step {s}",
        "start_time_unix_nano": start,
        "end_time_unix_nano": start + rng.randrange(1, 5_000_000),
        "attributes": {"input.value": f"trace {t} span {s}"},
    }
    if s:
        span["parent_span_id"] = (1).to_bytes(8, "big")
    return span


@pytest.fixture
def receivers(postgres_url: str) -> Iterator[list[str]]:
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tracejudge",
                "--store",
                postgres_url,
                "collect",
                "otlp",
                "--listen",
                "127.0.0.1:0",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(RECEIVERS)
    ]
    try:
        urls = []
        for proc in procs:
            assert proc.stdout is not None
            sel = selectors.DefaultSelector()
            sel.register(proc.stdout, selectors.EVENT_READ)
            assert sel.select(120), "a receiver did not start"
            urls.append(proc.stdout.readline().split()[-1] + "/v1/traces")
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


def test_four_receivers_take_overlapping_spans_at_once(postgres_url: str, receivers: list[str]) -> None:
    rng = random.Random(14)
    every = [(t, s) for t in range(TRACES) for s in range(SPANS_PER_TRACE)]
    # Each span goes to two or three receivers; each receiver sends its share in a shuffled order,
    # in requests that mix many traces, from two connections at once.
    shares: list[list[tuple[int, int]]] = [[] for _ in range(RECEIVERS)]
    for key in every:
        for r in rng.sample(range(RECEIVERS), rng.choice((2, 3))):
            shares[r].append(key)
    for share in shares:
        rng.shuffle(share)
    errors: list[str] = []

    def send(url: str, keys: list[tuple[int, int]]) -> None:
        with httpx.Client(trust_env=False, timeout=60) as client:
            for i in range(0, len(keys), 17):
                body = build_request([_span(t, s) for t, s in keys[i : i + 17]]).SerializeToString()
                resp = client.post(url, content=body, headers={"Content-Type": "application/x-protobuf"})
                if resp.status_code != 200:
                    errors.append(f"{url}: {resp.status_code} {resp.text[:200]}")

    threads = [
        threading.Thread(target=send, args=(url, share[half::2]))
        for url, share in zip(receivers, shares, strict=True)
        for half in (0, 1)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a sender hung (deadlock?)"
    assert errors == []

    with psycopg.connect(postgres_url) as conn:
        (stored,) = conn.execute("SELECT count(*) FROM spans").fetchone() or (0,)
        dups = conn.execute(
            "SELECT trace_id, span_id FROM spans GROUP BY 1, 2 HAVING count(*) > 1"
        ).fetchall()
        bounds = {r[0]: (r[1], r[2]) for r in conn.execute("SELECT trace_id, start_ns, end_ns FROM traces")}
    assert stored == len(every)
    assert dups == []
    store = open_store(postgres_url)
    try:
        summaries = {t.trace_id: t for t in store.list_traces()}
        assert len(summaries) == TRACES
        for t in range(TRACES):
            spans = [_span(t, s) for s in range(SPANS_PER_TRACE)]
            trace_id = f"{t + 1:032x}"
            summary = summaries[trace_id]
            assert summary.span_count == SPANS_PER_TRACE
            assert summary.name == "root"
            assert summary.sources == ("otlp",)
            assert bounds[trace_id] == (
                min(s["start_time_unix_nano"] for s in spans),
                max(s["end_time_unix_nano"] for s in spans),
            )
            assert len(store.get_spans(trace_id)) == SPANS_PER_TRACE
    finally:
        store.close()
