"""Langfuse pull: throughput against the local server with a fixed per-page latency, and peak memory.

Throughput is printed as a ratio to the latency-bound ideal: requests x latency / concurrency
(1.0 would be perfect overlap; the listing pages run beside the trace fetches). Memory is the
tracemalloc peak of the pull at two trace counts: it should stay flat (the pull streams pages).
The server runs in a child process, without its spec validation (that checks correctness in
the tests), so neither its CPU nor its memory is counted against the pull.

    .venv/bin/python benchmarks/bench_langfuse_pull.py [--traces 400] [--latency 0.02] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import tempfile
import time
import tracemalloc
from pathlib import Path

from tracejudge.store import SqliteStore
from tracejudge.testing.langfuse_server import LangfuseServer, synthetic_trace
from tracejudge.write import LangfuseApi, LangfuseCredentials
from tracejudge_collectors.langfuse import PullOptions, pull_langfuse


def _serve(n: int, latency: float, conn: object) -> None:
    """Child process: the server, so its CPU and memory are not counted against the pull."""
    srv = LangfuseServer(generation="v4", validate=False, page_latency=latency).start()
    for i in range(n):
        srv.add_trace(synthetic_trace(i))
    conn.send((srv.base_url, srv.public_key, srv.secret_key))  # type: ignore[attr-defined]
    conn.recv()  # type: ignore[attr-defined]  # wait until the parent is done
    reads = [r for r in srv.requests if r.method == "GET" and r.path != "/health"]
    conn.send(len(reads))  # type: ignore[attr-defined]
    srv.stop()


class _Server:
    def __init__(self, n: int, latency: float) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(n, latency, child), daemon=True)
        self.proc.start()
        base_url, pk, sk = self.conn.recv()
        self.creds = LangfuseCredentials.model_validate(
            {"base_url": base_url, "public_key": pk, "secret_key": sk}
        )

    def stop(self) -> int:
        self.conn.send("done")
        reads = int(self.conn.recv())
        self.proc.join(timeout=30)
        return reads


def _server(n: int, *, latency: float) -> _Server:
    return _Server(n, latency)


def _api(srv: _Server, concurrency: int) -> LangfuseApi:
    return LangfuseApi(srv.creds, max_connections=concurrency + 2)


def throughput(n: int, latency: float, concurrency: int, workdir: Path) -> None:
    srv = _server(n, latency=latency)
    store = SqliteStore(workdir / f"tp-{n}.db")
    try:
        with _api(srv, concurrency) as api:
            t0 = time.perf_counter()
            report = pull_langfuse(store, api, PullOptions(concurrency=concurrency))
            elapsed = time.perf_counter() - t0
        reads = srv.stop()
        ideal = reads * latency / concurrency
        print(
            f"throughput: {report.fetched} traces, {reads} GETs at {latency * 1000:.0f} ms,"
            f" concurrency {concurrency}: {elapsed:.2f} s vs ideal {ideal:.2f} s"
            f" -> ratio {elapsed / ideal:.2f}x ({report.fetched / elapsed:.0f} traces/s)"
        )
    finally:
        store.close()


def peak_memory(n: int, concurrency: int, workdir: Path) -> float:
    srv = _server(n, latency=0.0)
    store = SqliteStore(workdir / f"mem-{n}.db")
    try:
        with _api(srv, concurrency) as api:
            gc.collect()
            tracemalloc.start()
            report = pull_langfuse(store, api, PullOptions(concurrency=concurrency))
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        assert report.fetched == n
        return peak / 2**20
    finally:
        store.close()
        srv.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=400)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        throughput(args.traces, args.latency, args.concurrency, workdir)
        small, large = args.traces // 2, args.traces * 2
        a = peak_memory(small, args.concurrency, workdir)
        b = peak_memory(large, args.concurrency, workdir)
        print(
            f"peak memory of the pull (server in another process): {small} traces {a:.1f} MiB,"
            f" {large} traces {b:.1f} MiB -> ratio {b / a:.2f} for {large // small}x the traces"
        )


if __name__ == "__main__":
    main()
