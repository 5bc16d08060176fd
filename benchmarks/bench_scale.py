"""Scale-out on PostgreSQL: aggregate OTLP intake of 1, 2 and 4 receiver processes, and scoring
throughput of 1, 2 and 4 `score --run` worker processes sharing one run against a 500 ms judge.

Intake: the same OTLP protobuf requests (GenAI-sized spans, traces split across requests so
receivers write spans of the same traces at once) are sent to N receivers (`tracejudge collect
otlp`, one process each, all on one PostgreSQL), `--senders` sender threads per receiver (default
1); the figure is spans stored per second and its ratio to one receiver, and the database's
transactions per request (pg_stat_database.xact_commit: a receiver's requests in flight at once
share a commit).

Scoring: ITEMS stored traces (the restaurant example's, copied under fresh trace ids, judged without
the cache) scored by N worker processes `score --run NAME --concurrency C` against the scripted
OpenAI-compatible judge answering after 500 ms; the figure is items per second, its ratio to one
worker (the judge is the bound: the ideal is N), and the wall time against the ideal
(judge calls x latency / (N x C)).

    TRACEJUDGE_TEST_POSTGRES=postgresql://... python benchmarks/bench_scale.py
    ... python benchmarks/bench_scale.py --skip-scoring --senders 4 --per-request 32   # group commit
    python benchmarks/bench_scale.py --store postgresql://user:pass@host/db   # an existing database

With TRACEJUDGE_TEST_POSTGRES each phase gets a fresh database (the user needs CREATEDB).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import selectors
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.collectors.otel.conftest import build_request  # noqa: E402
from tests.conftest import load_module  # noqa: E402
from tests.store.conftest import create_database, drop_database  # noqa: E402
from tracejudge.schema import RawSpan  # noqa: E402
from tracejudge.store import open_store  # noqa: E402
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer  # noqa: E402

EXAMPLE = ROOT / "examples" / "restaurant"
LATENCY = 0.5


@contextmanager
def database(store: str | None) -> Iterator[str]:
    if store:
        yield store
        return
    admin = os.environ.get("TRACEJUDGE_TEST_POSTGRES")
    if not admin:
        sys.exit("set TRACEJUDGE_TEST_POSTGRES (a user that may CREATE DATABASE) or give --store")
    name = create_database(admin, "tjbench")
    try:
        yield admin.rsplit("/", 1)[0] + "/" + name
    finally:
        drop_database(admin, name)  # as the tests drop theirs (not WITH (FORCE): see there)


# ---------------------------------------------------------------- intake


def _requests(n_traces: int, spans_per_trace: int, per_request: int) -> list[bytes]:
    text = "The supplier shall not exceed the prepayment amount in clause 7.2 of the attachment. " * 20
    spans: list[dict[str, Any]] = []
    for s in range(spans_per_trace):
        for t in range(n_traces):  # interleaved: each request holds spans of many traces
            spans.append(
                {
                    "trace_id": (t + 1).to_bytes(16, "big"),
                    "span_id": (s + 1).to_bytes(8, "big"),
                    "name": "agent" if s == 0 else f"step {s}",
                    **({"parent_span_id": (1).to_bytes(8, "big")} if s else {}),
                    "start_time_unix_nano": 1_790_000_000_000_000_000 + t * 1000 + s,
                    "end_time_unix_nano": 1_790_000_000_000_000_500 + t * 1000 + s,
                    "attributes": {"input.value": f"trace {t} " + text, "llm.model_name": "gpt-4.1-mini"},
                }
            )
    return [
        build_request(spans[i : i + per_request]).SerializeToString()
        for i in range(0, len(spans), per_request)
    ]


@contextmanager
def receivers(url: str, n: int) -> Iterator[list[str]]:
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tracejudge",
                "--store",
                url,
                "collect",
                "otlp",
                "--listen",
                "127.0.0.1:0",
            ],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for _ in range(n)
    ]
    try:
        urls = []
        for proc in procs:
            assert proc.stdout is not None
            sel = selectors.DefaultSelector()
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(120):
                sys.exit("a receiver did not start")
            urls.append(proc.stdout.readline().split()[-1] + "/v1/traces")
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=60)


def _commits(url: str) -> int:
    """Transactions committed in the database of ``url`` so far (this query's own included)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def intake(store: str | None, n: int, bodies: list[bytes], senders: int = 1) -> tuple[float, float]:
    """Seconds to store every body through ``n`` receivers (``senders`` threads each), and the
    database's transactions per request while they did."""
    with database(store) as url:
        with receivers(url, n) as urls:
            before = _commits(url)
            wall = _send([u for u in urls for _ in range(senders)], bodies)
        time.sleep(1.0)  # a receiver's statistics reach pg_stat_database when its sessions end
        return wall, (_commits(url) - before - 1) / len(bodies)


def _send(targets: list[str], bodies: list[bytes]) -> float:
    """Seconds for one thread per target to POST its share of the bodies."""
    n = len(targets)

    def send(target: str, mine: list[bytes]) -> None:
        with httpx.Client(trust_env=False, timeout=120) as client:
            for body in mine:
                r = client.post(target, content=body, headers={"Content-Type": "application/x-protobuf"})
                r.raise_for_status()

    threads = [threading.Thread(target=send, args=(u, bodies[i::n])) for i, u in enumerate(targets)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


# ---------------------------------------------------------------- scoring


def _spans(copies: int) -> list[RawSpan]:
    traces = load_module(EXAMPLE / "traces.py", "restaurant_traces")
    base = list(traces.all_spans())
    out: list[RawSpan] = []
    for k in range(copies):
        out.extend(s.model_copy(update={"trace_id": f"{k:04x}" + s.trace_id[4:]}) for s in base)
    return out


def scoring(store: str | None, workers: int, concurrency: int, copies: int) -> tuple[float, int, int, float]:
    traces = load_module(EXAMPLE / "traces.py", "restaurant_traces")
    rules = [
        Rule(reply=r["reply"], any_message=re.escape(r["match"]), delay=LATENCY) for r in traces.judge_rules()
    ]
    spans = _spans(copies)
    with database(store) as url, ScriptedOpenAIServer(rules) as judge:
        s = open_store(url)
        s.put_spans(spans)
        s.close()
        env = {
            **os.environ,
            "OPENAI_BASE_URL": judge.base_url,
            "OPENAI_API_KEY": "sk-bench",
            "NO_PROXY": "127.0.0.1",
        }
        name = f"bench-{uuid.uuid4().hex[:8]}"
        cmd = [
            sys.executable,
            "-m",
            "tracejudge",
            "--store",
            url,
            "score",
            "--rubric",
            str(EXAMPLE / "rubric.yaml"),
            "--manifest",
            str(EXAMPLE / "manifest.jsonl"),
            "--no-cache",
            "--json",
            "--run",
            name,
            "--concurrency",
            str(concurrency),
        ]
        t0 = time.perf_counter()
        procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env, cwd=ROOT) for _ in range(workers)]
        for p in procs:
            if p.wait() != 0:
                sys.exit("a worker failed")
        wall = time.perf_counter() - t0
        calls = len(judge.completion_requests())
        items = len({s.trace_id for s in spans})
        with psycopg.connect(url) as conn:
            stamps = sorted(
                datetime.fromisoformat(json.loads(r[0])["scored_at"]).timestamp()
                for r in conn.execute("SELECT payload FROM score_items WHERE run_id = %s", (name,))
            )
    # Steady state: from the first item scored to the last (start-up and the first judge wait left out).
    steady = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else float("nan")
    return wall, items, calls, steady


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", default=None, help="an existing PostgreSQL database (else a fresh one)")
    parser.add_argument("--traces", type=int, default=1000, help="intake: traces (x 10 spans)")
    parser.add_argument("--senders", type=int, default=1, help="intake: sender threads per receiver")
    parser.add_argument("--per-request", type=int, default=256, help="intake: spans per request")
    parser.add_argument("--skip-intake", action="store_true")
    parser.add_argument("--skip-scoring", action="store_true")
    parser.add_argument("--copies", type=int, default=40, help="scoring: copies of the 14 example traces")
    parser.add_argument(
        "--concurrency", type=int, default=8, help="scoring: judge calls in flight per worker"
    )
    args = parser.parse_args()

    if not args.skip_intake:
        intake_phase(args)
    if not args.skip_scoring:
        scoring_phase(args)


def intake_phase(args: argparse.Namespace) -> None:
    bodies = _requests(args.traces, 10, args.per_request)
    n_spans = args.traces * 10
    print(
        f"intake: {n_spans} spans in {len(bodies)} requests, receivers on one PostgreSQL,"
        f" {args.senders} sender(s) each"
    )
    base = None
    for n in (1, 2, 4):
        wall, commits = intake(args.store, n, bodies, args.senders)
        rate = n_spans / wall
        base = base or rate
        print(
            f"  {n} receiver(s): {wall:6.2f} s  {rate:8.0f} spans/s  {rate / base:4.2f}x one receiver"
            f"  {commits:4.2f} commits/request"
        )


def scoring_phase(args: argparse.Namespace) -> None:
    print(
        f"scoring: {args.copies * 14} items, {LATENCY * 1000:.0f} ms judge,"
        f" concurrency {args.concurrency} per worker"
    )
    base = None
    for n in (1, 2, 4):
        wall, items, calls, steady = scoring(args.store, n, args.concurrency, args.copies)
        base = base or steady
        ideal = calls * LATENCY / (n * args.concurrency)
        bound = n * args.concurrency / LATENCY * items / calls  # items/s the judge allows
        print(
            f"  {n} worker(s): wall {wall:6.2f} s ({wall / ideal:4.2f}x the ideal {ideal:.2f} s, start-up"
            f" included); steady {steady:6.1f} items/s = {steady / base:4.2f}x one worker,"
            f" {steady / bound:4.2f} of the judge's bound"
        )


if __name__ == "__main__":
    main()
