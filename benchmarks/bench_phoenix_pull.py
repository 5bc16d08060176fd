"""Phoenix pull against plain httpx fetching the same pages, on the local Phoenix server with a fixed
per-page latency.

Each round runs three things against one server (a child process, so its CPU is counted against
neither side), in an order that rotates from round to round:

- the pull: `pull_phoenix` into a fresh SQLite store (list root spans, fetch traces in batches,
  convert, store, mark);
- the ideal: plain `httpx` doing the same fetching and nothing else: the listing pages one after the
  other (each needs the cursor of the one before), each batch of trace ids fetched at the same
  concurrency as soon as the listing has named it, every answer parsed as JSON. It must send exactly
  the requests the pull sent (checked), so the pull/ideal ratio is what the pull costs beyond its
  HTTP (1.0: nothing);
- the replay: the pull's recorded requests fetched all at once at the same concurrency, listing
  pages beside the batch pages they name (no client can do that: it does not know the batches
  before the listing answers). Earlier versions of this benchmark compared with this; it is still
  printed, as a lower bound.

Prints the medians and ranges over the rounds, the CPU the pull and the ideal spent in this
process, and the load average (the machine is shared).

    .venv/bin/python benchmarks/bench_phoenix_pull.py [--traces 400] [--latency 0.02] [--concurrency 4]
        [--rounds 15]

Also prints the time after each side's last answer was parsed (the pull's: converting and storing
the last batch, the watermark), and the pull's time up to its last answer against the ideal's.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from tracejudge.store import SqliteStore
from tracejudge.testing.phoenix_server import PhoenixServer, synthetic_spans
from tracejudge.write import PhoenixApi, PhoenixCredentials
from tracejudge_collectors.phoenix import PullOptions, pull_phoenix

_Get = tuple[str, tuple[tuple[str, str], ...]]
_PATH = "/v1/projects/default/spans"
_PAGE = 1000  # the pull's page size (PullOptions.page_size)
_BATCH = 50  # the pull's traces per request (PullOptions.trace_batch)


def _serve(n: int, latency: float, conn: Any) -> None:
    """Child process: the server; on "gets" sends the GETs answered since the last "gets"."""
    srv = PhoenixServer(validate=False, page_latency=latency).start()
    for i in range(n):
        for span in synthetic_spans(i):
            srv.add_span("default", span)
    conn.send(srv.base_url)
    seen = 0
    while conn.recv() == "gets":
        requests = srv.requests
        conn.send([(r.path, tuple(r.query)) for r in requests[seen:] if r.method == "GET"])
        seen = len(requests)
    srv.stop()


_SPANS: list[int] = []  # spans each pull stored
_TAILS: dict[str, list[float]] = {"pull": [], "ideal": []}  # seconds from the last answer parsed to the end


class _LastAnswer:
    """When the last answer of a run was parsed (any thread)."""

    def __init__(self) -> None:
        self.at = 0.0
        self._lock = threading.Lock()

    def mark(self) -> None:
        now = time.perf_counter()
        with self._lock:
            self.at = max(self.at, now)


class _TimedApi(PhoenixApi):
    """The pull's client, noting when each answer is parsed (the time after the last one is the
    pull's own: converting and storing the last batch, the watermark)."""

    last: _LastAnswer

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        answer = super().get(path, params)
        self.last.mark()
        return answer


def _pull(base_url: str, concurrency: int, workdir: Path, n: int) -> tuple[float, float]:
    """The pull into a fresh store; the store and the client are made and closed outside the timing."""
    store = SqliteStore(workdir / f"pull-{time.monotonic_ns()}.db")
    try:
        with _TimedApi(PhoenixCredentials.model_validate({"base_url": base_url})) as api:
            api.last = _LastAnswer()
            t0, c0 = time.perf_counter(), time.process_time()
            report = pull_phoenix(store, api, PullOptions(concurrency=concurrency))
            end = time.perf_counter()
            timed = end - t0, time.process_time() - c0
    finally:
        store.close()
    assert report.fetched == n, report
    _SPANS.append(report.spans_new)
    _TAILS["pull"].append(end - api.last.at)
    return timed


def _pages(client: httpx.Client, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Every page of one query, following its cursor."""
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        page = client.get(_PATH, params=query).json()
        pages.append(page)
        cursor = page.get("next_cursor")
        if not cursor or not page.get("data"):
            return pages


def _ideal(base_url: str, concurrency: int, n: int) -> tuple[float, float]:
    """The pull's requests by plain httpx: listing pages in turn, each batch fetched once named."""
    listing = {"parent_id": "null", "sort": "start_time", "order": "asc", "limit": _PAGE}

    last = _LastAnswer()

    def batch(ids: list[str]) -> int:
        params = {"trace_id": ids, "sort": "id", "order": "asc", "limit": _PAGE}
        spans = sum(len(p.get("data") or []) for p in _pages(client, params))
        last.mark()
        return spans

    with (
        httpx.Client(base_url=base_url, timeout=60, trust_env=False) as client,
        ThreadPoolExecutor(max_workers=concurrency) as pool,
    ):
        t0, c0 = time.perf_counter(), time.process_time()
        futures: list[Future[int]] = []
        ids: list[str] = []
        listed: set[str] = set()
        cursor: str | None = None
        while True:
            page = client.get(_PATH, params={**listing, **({"cursor": cursor} if cursor else {})}).json()
            rows = page.get("data") or []
            for row in rows:
                trace_id = str(row["context"]["trace_id"]).lower()
                if trace_id not in listed:
                    listed.add(trace_id)
                    ids.append(trace_id)
                    if len(ids) == _BATCH:
                        futures.append(pool.submit(batch, ids))
                        ids = []
            cursor = page.get("next_cursor")
            if not cursor or not rows:
                break
        if ids:
            futures.append(pool.submit(batch, ids))
        sum(f.result() for f in futures)
        end = time.perf_counter()
        timed = end - t0, time.process_time() - c0
    assert len(listed) == n, len(listed)
    _TAILS["ideal"].append(end - last.at)
    return timed


def _replay(base_url: str, concurrency: int, gets: list[_Get]) -> tuple[float, float]:
    """The recorded requests all at once (the listing beside the batches it names)."""
    with httpx.Client(base_url=base_url, timeout=60, trust_env=False) as client:

        def fetch(req: _Get) -> int:
            path, query = req
            return len(client.get(path, params=list(query)).json().get("data") or [])

        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            t0, c0 = time.perf_counter(), time.process_time()
            sum(pool.map(fetch, gets))
            return time.perf_counter() - t0, time.process_time() - c0


def _spread(values: list[float], unit: str = "", digits: int = 2) -> str:
    return (
        f"median {statistics.median(values):.{digits}f}{unit}"
        f" (range {min(values):.{digits}f}–{max(values):.{digits}f})"
    )


def run(n: int, latency: float, concurrency: int, rounds: int, workdir: Path) -> dict[str, list[float]]:
    ctx = mp.get_context("spawn")
    conn, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(n, latency, child), daemon=True)
    proc.start()
    base_url = conn.recv()
    out: dict[str, list[float]] = {
        k: [] for k in ("pull", "ideal", "replay", "pull_cpu", "ideal_cpu", "vs_ideal", "vs_replay")
    }
    try:
        # A first pull records the requests the others must match (and warms the server).
        _pull(base_url, concurrency, workdir, n)
        conn.send("gets")
        gets: list[_Get] = conn.recv()
        _ideal(base_url, concurrency, n)
        conn.send("gets")
        ideal_gets: list[_Get] = conn.recv()
        key = sorted((p, tuple(sorted(q))) for p, q in gets)
        assert key == sorted((p, tuple(sorted(q))) for p, q in ideal_gets), "the ideal's requests differ"
        for tails in _TAILS.values():
            tails.clear()  # the warm-up's
        # Each step returns (wall seconds, CPU seconds of this process) of its timed part.
        steps: list[tuple[str, Callable[[], tuple[float, float]]]] = [
            ("pull", lambda: _pull(base_url, concurrency, workdir, n)),
            ("ideal", lambda: _ideal(base_url, concurrency, n)),
            ("replay", lambda: _replay(base_url, concurrency, gets)),
        ]
        for r in range(rounds):
            for name, fn in steps[r % 3 :] + steps[: r % 3]:
                wall, cpu = fn()
                out[name].append(wall)
                if name != "replay":
                    out[f"{name}_cpu"].append(cpu)
            out["vs_ideal"].append(out["pull"][-1] / out["ideal"][-1])
            out["vs_replay"].append(out["pull"][-1] / out["replay"][-1])
        out["requests"] = [float(len(gets))]
    finally:
        conn.send("stop")
        proc.join(timeout=30)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--traces", type=int, default=400)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        out = run(args.traces, args.latency, args.concurrency, args.rounds, Path(tmp))
    load_after = os.getloadavg()[0]
    print(
        f"Phoenix pull, {args.traces} traces ({int(out['requests'][0])} GETs),"
        f" {args.latency * 1000:.0f} ms per page, concurrency {args.concurrency},"
        f" {args.rounds} rounds, load {load_before:.1f} -> {load_after:.1f}"
    )
    print(f"  pull {_spread(out['pull'], ' s')}, CPU {_spread(out['pull_cpu'], ' s')}")
    print(f"  plain httpx ideal {_spread(out['ideal'], ' s')}, CPU {_spread(out['ideal_cpu'], ' s')}")
    print(f"  replay all at once {_spread(out['replay'], ' s')}")
    print(f"  pull / ideal {_spread(out['vs_ideal'], 'x')}; pull / replay {_spread(out['vs_replay'], 'x')}")
    # Where the pull's time beyond the ideal's goes: fetching more slowly (the pull's work on what
    # arrived competes with its fetches for the GIL and the cores), or the work after the last answer
    # (the last batch's conversion and store, the watermark).
    tail_ms = {k: [t * 1000 for t in v] for k, v in _TAILS.items()}
    print(
        f"  after the last answer: pull {_spread(tail_ms['pull'], ' ms', 1)},"
        f" ideal {_spread(tail_ms['ideal'], ' ms', 1)}"
    )
    fetching = [(p - t) / i for p, t, i in zip(out["pull"], _TAILS["pull"], out["ideal"], strict=True)]
    print(f"  pull up to its last answer / ideal {_spread(fetching, 'x')}")
    # CPU depends less on the machine's load than wall time does: what the pull spends beyond the
    # ideal's fetching and parsing (conversion, store, markers) per span it stored.
    extra = [(p - i) / _SPANS[-1] * 1e6 for p, i in zip(out["pull_cpu"], out["ideal_cpu"], strict=True)]
    print(f"  pull CPU beyond the ideal's, per span stored: {_spread(extra, ' us', 0)}")


if __name__ == "__main__":
    main()
