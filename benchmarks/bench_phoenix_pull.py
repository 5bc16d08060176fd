"""Phoenix pull against plain httpx fetching the same pages, on the local Phoenix server with a fixed
per-page latency.

The pull runs first (`pull_phoenix` into a fresh SQLite store: list root spans, fetch traces in
batches, convert, store, mark). The server records every GET it answered; the baseline then fetches
exactly those URLs with a plain `httpx.Client` at the same concurrency, parsing each JSON answer, and
nothing else. The ratio is pull time / baseline time (1.0: the pull costs nothing beyond its HTTP).
The server runs in a child process so its CPU is not counted against either.

    .venv/bin/python benchmarks/bench_phoenix_pull.py [--traces 400] [--latency 0.02] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from tracejudge.store import SqliteStore
from tracejudge.testing.phoenix_server import PhoenixServer, synthetic_spans
from tracejudge.write import PhoenixApi, PhoenixCredentials
from tracejudge_collectors.phoenix import PullOptions, pull_phoenix


def _serve(n: int, latency: float, conn: Any) -> None:
    srv = PhoenixServer(validate=False, page_latency=latency).start()
    for i in range(n):
        for span in synthetic_spans(i):
            srv.add_span("default", span)
    conn.send(srv.base_url)
    conn.recv()
    gets = [(r.path, list(r.query)) for r in srv.requests if r.method == "GET"]
    conn.send(gets)
    srv.stop()


def run(n: int, latency: float, concurrency: int, workdir: Path) -> tuple[float, float, int, int]:
    ctx = mp.get_context("spawn")
    conn, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(n, latency, child), daemon=True)
    proc.start()
    base_url = conn.recv()
    try:
        store = SqliteStore(workdir / f"pull-{n}-{concurrency}.db")
        with PhoenixApi(PhoenixCredentials.model_validate({"base_url": base_url})) as api:
            t0 = time.perf_counter()
            report = pull_phoenix(store, api, PullOptions(concurrency=concurrency))
            pulled = time.perf_counter() - t0
        store.close()
    finally:
        conn.send("done")
        gets = conn.recv()
        proc.join(timeout=30)
    assert report.fetched == n, report

    # The baseline needs a server again: the same data, the same latency.
    conn, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(n, latency, child), daemon=True)
    proc.start()
    base_url = conn.recv()
    try:
        with httpx.Client(base_url=base_url, timeout=60, trust_env=False) as client:

            def fetch(req: tuple[str, list[tuple[str, str]]]) -> int:
                path, query = req
                return len(client.get(path, params=query).json().get("data") or [])

            t0 = time.perf_counter()
            with ThreadPoolExecutor(max_workers=concurrency) as pool:
                rows = sum(pool.map(fetch, gets))
            plain = time.perf_counter() - t0
    finally:
        conn.send("done")
        conn.recv()
        proc.join(timeout=30)
    return pulled, plain, len(gets), rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--traces", type=int, default=400)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pulled, plain, requests, rows = run(args.traces, args.latency, args.concurrency, Path(tmp))
    print(
        f"Phoenix pull, {args.traces} traces ({rows} rows in {requests} GETs),"
        f" {args.latency * 1000:.0f} ms per page, concurrency {args.concurrency}:"
        f" pull {pulled:.2f} s, plain httpx {plain:.2f} s,"
        f" {pulled / plain:.2f}x"
    )


if __name__ == "__main__":
    main()
