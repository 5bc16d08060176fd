"""Judge scoring throughput against a local OpenAI-compatible server with a fixed model latency.

One run reports, for N items at concurrency C and latency L:
  ideal   N x L / C (the latency bound)
  raw     the same requests over C keep-alive connections with asyncio streams, no client library
  floor   the bare ``openai.AsyncOpenAI`` client sending the same requests with a semaphore of C
          (and over openai's aiohttp transport, when tracejudge uses it)
  tracejudge  ``score`` end to end: store -> normalize -> checks -> prompt -> judge -> parse -> store
  the CLI     ``tracejudge score --json`` in its own process, timed from outside (start-up and output
              included), tracejudge's modules compiled as an install leaves them; median of runs,
              and that run's timeline: start -> the server's first request -> its last reply -> exit
  phoenix-evals  the same workload through arize-phoenix-evals, when an interpreter with it is given
                 (``--phoenix-python /path/to/python``) or importable here; otherwise reported absent

Usage: python benchmarks/bench_score.py [--quick] [--n N] [--concurrency C] [--latency S] [--cli-runs K]
                                        [--transport aiohttp|httpx]
The server is an asyncio HTTP/1.1 server in its own process. Figures are ratios measured in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPLY = json.dumps(
    {
        "criteria": {
            "relevance": {"reasoning": "addresses the question", "score": 8},
            "accuracy": {"reasoning": "agrees with the context", "score": 7},
        },
        "reasoning": "fine",
    }
)


# --- the model server: asyncio, own process, fixed latency ------------------------------------


def _serve(port_q: mp.Queue[int], latency: float, marks: Any) -> None:
    """``marks`` (shared doubles, ``time.monotonic``, one clock for every process on Linux): when the
    first request of a run came in and when the last reply went out; the bench zeroes them per run."""
    body = json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": "bench-judge",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": REPLY}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 400, "completion_tokens": 40, "total_tokens": 440},
        }
    ).encode()
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                header = await reader.readuntil(b"\r\n\r\n")
                if not marks[0]:
                    marks[0] = time.monotonic()
                length = 0
                for line in header.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                if length:
                    await reader.readexactly(length)
                await asyncio.sleep(latency)
                writer.write(head + body)
                await writer.drain()
                marks[1] = time.monotonic()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
        port_q.put(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    asyncio.run(main())


MARKS: Any = None
"""The server's first-request and last-reply times (see :func:`_serve`)."""


def start_server(latency: float) -> tuple[mp.Process, str]:
    global MARKS
    MARKS = mp.Array("d", 2, lock=False)
    q: mp.Queue[int] = mp.Queue()
    proc = mp.Process(target=_serve, args=(q, latency, MARKS), daemon=True)
    proc.start()
    port = q.get(timeout=10)
    return proc, f"http://127.0.0.1:{port}/v1"


@dataclass(frozen=True)
class CliTimes:
    """One CLI run timed from outside, split at the server's first request and last reply."""

    total: float
    to_first_request: float
    first_request_to_last_reply: float
    last_reply_to_exit: float
    cpu: float


# --- the workload ------------------------------------------------------------------------------

RUBRIC = """\
name: bench
version: 1
judge: {{model: bench-judge, temperature: 0, base_url: "{url}", max_retries: 0, timeout_s: 60}}
judged: [input, context, output]
criteria:
  - {{name: relevance, description: "The answer addresses what was asked.", threshold: 7}}
  - {{name: accuracy, description: "The answer agrees with the context.", threshold: 7}}
checks:
  - {{name: mentions_price, type: contains, value: "$"}}
"""


def make_spans(n: int) -> list:  # type: ignore[type-arg]
    from tracejudge.schema import RawSpan

    out = []
    for i in range(n):
        tid = f"{i:032x}"
        t0 = 1_790_000_000_000_000_000 + i * 1_000_000_000
        out.append(
            RawSpan(
                trace_id=tid,
                span_id=f"{i:015x}a",
                name="assistant",
                start_time_unix_nano=t0,
                end_time_unix_nano=t0 + 10**8,
                attributes={
                    "openinference.span.kind": "AGENT",
                    "input.value": f"How much is pizza number {i}?",
                    "output.value": f"Pizza {i} costs ${10 + i % 7}.00.",
                },
            )
        )
        out.append(
            RawSpan(
                trace_id=tid,
                span_id=f"{i:015x}b",
                parent_span_id=f"{i:015x}a",
                name="retrieve",
                start_time_unix_nano=t0 + 1000,
                end_time_unix_nano=t0 + 10**7,
                attributes={
                    "openinference.span.kind": "RETRIEVER",
                    "retrieval.documents.0.document.id": "menu",
                    "retrieval.documents.0.document.content": f"Pizza {i}: ${10 + i % 7}.00. " * 20,
                },
            )
        )
    return out


def build_requests(store, rubric) -> list[list[dict[str, str]]]:  # type: ignore[no-untyped-def]
    from tracejudge.checks import task_category
    from tracejudge.judge import build_messages
    from tracejudge.normalize import normalize

    out = []
    for tid in store.iter_trace_ids():
        task = normalize(store.get_spans(tid))
        out.append(build_messages(rubric, task, rubric.criteria, category=task_category(task)))
    return out


async def raw_floor(url: str, requests: list[list[dict[str, str]]], concurrency: int) -> float:
    """The same requests over ``concurrency`` keep-alive HTTP/1.1 connections written with asyncio
    streams, no client library: what the server and this machine allow at all."""
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    queue = list(reversed(requests))

    async def connection() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        while queue:
            body = json.dumps({"model": "bench-judge", "messages": queue.pop(), "temperature": 0}).encode()
            writer.write(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(body), body)
            )
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")
            )
            reply = json.loads(await reader.readexactly(length))
            json.loads(reply["choices"][0]["message"]["content"])
        writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(connection() for _ in range(concurrency)))
    return time.perf_counter() - t0


async def bare_floor(
    url: str, requests: list[list[dict[str, str]]], concurrency: int, *, aiohttp: bool = False
) -> float:
    import openai

    http = {"http_client": openai.DefaultAioHttpClient(timeout=60)} if aiohttp else {}
    client = openai.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60, **http)
    sem = asyncio.Semaphore(concurrency)

    async def one(msgs: list[dict[str, str]]) -> None:
        async with sem:
            r = await client.chat.completions.create(model="bench-judge", messages=msgs, temperature=0)
            json.loads(r.choices[0].message.content or "")

    t0 = time.perf_counter()
    await asyncio.gather(*(one(m) for m in requests))
    elapsed = time.perf_counter() - t0
    await client.close()
    return elapsed


def tracejudge_run(url: str, n: int, concurrency: int) -> tuple[float, dict[str, int]]:
    from tracejudge.judge import parse_rubric
    from tracejudge.runs import ScoreOptions, score_run, select_trace_ids
    from tracejudge.store import SqliteStore

    with tempfile.TemporaryDirectory() as d:
        store = SqliteStore(Path(d) / "bench.db")
        store.put_spans(make_spans(n))
        rubric = parse_rubric(RUBRIC.format(url=url))
        t0 = time.perf_counter()
        run = score_run(rubric, store, select_trace_ids(store), options=ScoreOptions(concurrency=concurrency))
        elapsed = time.perf_counter() - t0
        o = run.summary.overall
        store.close()
    return elapsed, {"pass": o.pass_, "fail": o.fail, "indeterminate": o.indeterminate}


ROOT = Path(__file__).resolve().parents[1]


def compiled_bytecode(prefix: Path) -> dict[str, str]:
    """An environment whose Python finds tracejudge's modules compiled under ``prefix``, as ``pip
    install`` leaves them (this machine sets PYTHONDONTWRITEBYTECODE=1, so a source checkout would
    otherwise compile every module it imports on every start). The other packages' modules are
    compiled there by the first process that imports them (the bench's untimed CLI run)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "tracejudge"), str(ROOT / "collectors")],
        check=True,
        env=env,
    )
    return env


def cli_run(url: str, n: int, concurrency: int, env: dict[str, str]) -> CliTimes:
    """``tracejudge score --json`` as a user runs it, timed from outside: the process's start-up
    (imports, opening the store, the rubric) and printing the items included; split at the server's
    first request and last reply, with the process's CPU."""
    from tracejudge.store import SqliteStore

    with tempfile.TemporaryDirectory() as d:
        store = SqliteStore(Path(d) / "cli.db")
        store.put_spans(make_spans(n))
        store.close()
        rubric = Path(d) / "rubric.yaml"
        rubric.write_text(RUBRIC.format(url=url))
        cmd = [sys.executable, "-m", "tracejudge", "--store", str(Path(d) / "cli.db"), "score"]
        cmd += ["--rubric", str(rubric), "--concurrency", str(concurrency), "--json"]
        MARKS[0] = MARKS[1] = 0.0
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env={**env, "NO_PROXY": "127.0.0.1"})
        end = time.monotonic()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        first, last = MARKS[0], MARKS[1]
        return CliTimes(end - t0, first - t0, last - first, end - last, cpu)


def startup(env: dict[str, str]) -> float:
    """``tracejudge --help`` timed from outside: the interpreter and the CLI's own imports."""
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tracejudge", "--help"], check=True, stdout=subprocess.DEVNULL, env=env
    )
    return time.perf_counter() - t0


PHOENIX_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys, time
    import pandas as pd
    from phoenix.evals import LLM, async_evaluate_dataframe, create_evaluator
    url, n, conc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    llm = LLM(provider="openai", model="bench-judge", base_url=url, api_key="unused")

    @create_evaluator(name="judge", kind="llm")
    async def judge(q: str, a: str) -> float:
        text = await llm.async_generate_text(f"Score relevance and accuracy 0-10 as JSON. Q: {q} A: {a}")
        return float(json.loads(text)["criteria"]["accuracy"]["score"])

    rows = [{"q": f"pizza {i}?", "a": f"Pizza {i} costs ${10 + i % 7}.00."} for i in range(n)]
    t0 = time.perf_counter()
    out = asyncio.run(async_evaluate_dataframe(pd.DataFrame(rows), [judge], concurrency=conc))
    print(json.dumps({"elapsed": time.perf_counter() - t0, "n": len(out)}))
    """
)


def phoenix_run(python: str | None, url: str, n: int, concurrency: int) -> tuple[float | None, str]:
    candidates = [python] if python else []
    candidates.append(sys.executable)
    for exe in candidates:
        if not exe or not Path(exe).exists():
            continue
        try:
            proc = subprocess.run(
                [exe, "-c", PHOENIX_SCRIPT, url, str(n), str(concurrency)],
                capture_output=True,
                text=True,
                timeout=900,
                env={**os.environ, "PHOENIX_TELEMETRY_ENABLED": "false"},
            )
        except subprocess.TimeoutExpired:
            return None, "timed out"
        if proc.returncode == 0:
            data = json.loads(proc.stdout.strip().splitlines()[-1])
            return float(data["elapsed"]), f"{exe}"
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        if "No module named" not in last:
            return None, f"failed: {last[:160]}"
    return None, "arize-phoenix-evals not installed (give --phoenix-python PATH)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="N=200")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--cli-runs", type=int, default=3, help="Runs of the CLI from outside (median shown).")
    ap.add_argument("--phoenix-python", default=None, help="An interpreter with arize-phoenix-evals.")
    ap.add_argument(
        "--transport",
        choices=("aiohttp", "httpx"),
        default=None,
        help="The judge's (default: as tracejudge picks).",
    )
    args = ap.parse_args()
    n = 200 if args.quick else args.n
    if args.transport:
        os.environ["TRACEJUDGE_JUDGE_HTTP"] = args.transport  # the run in process and the CLI's
    from tracejudge.judge import judge_transport

    transport = judge_transport()
    c, lat = args.concurrency, args.latency
    proc, url = start_server(lat)
    pycache = tempfile.TemporaryDirectory()
    try:
        from tracejudge.judge import parse_rubric
        from tracejudge.store import SqliteStore

        ideal = n * lat / c
        with tempfile.TemporaryDirectory() as d:
            store = SqliteStore(Path(d) / "req.db")
            store.put_spans(make_spans(n))
            requests = build_requests(store, parse_rubric(RUBRIC.format(url=url)))
            store.close()
        raw = asyncio.run(raw_floor(url, requests, c))
        floor = asyncio.run(bare_floor(url, requests, c))
        aio_floor = (
            asyncio.run(bare_floor(url, requests, c, aiohttp=True)) if transport == "aiohttp" else None
        )
        tj, verdicts = tracejudge_run(url, n, c)
        env = compiled_bytecode(Path(pycache.name))
        helps = sorted(startup(env) for _ in range(5))
        # One run untimed: with the cache prefix set Python reads no __pycache__ of site-packages
        # either, so the first run compiled every module of openai, aiohttp, pydantic ... it imported
        # (an outlier of ~0.2x among the runs), which an install has compiled already.
        cli_run(url, c, c, env)
        clis = sorted((cli_run(url, n, c, env) for _ in range(max(1, args.cli_runs))), key=lambda t: t.total)
        phx, phx_note = phoenix_run(args.phoenix_python, url, n, c)
    finally:
        proc.terminate()
        proc.join()
        pycache.cleanup()
    mid = clis[len(clis) // 2]  # the median run (of an odd number; the upper middle one otherwise)
    cli = statistics.median(t.total for t in clis)
    print(
        f"bench_score: N={n} concurrency={c} latency={lat * 1000:.0f} ms  ({socket.gethostname()}, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})"
    )
    print(f"  ideal N*L/C                 {ideal:8.2f} s   1.00x")
    print(f"  raw HTTP/1.1, no client     {raw:8.2f} s   {raw / ideal:.2f}x ideal")
    print(f"  floor: bare AsyncOpenAI     {floor:8.2f} s   {floor / ideal:.2f}x ideal")
    if aio_floor is not None:
        print(f"  bare AsyncOpenAI over aiohttp {aio_floor:6.2f} s   {aio_floor / ideal:.2f}x ideal")
    print(f"  tracejudge's judge transport: {transport}")
    print(
        f"  tracejudge score end to end {tj:8.2f} s   {tj / ideal:.2f}x ideal,"
        f" {tj / floor:.2f}x floor  {verdicts}"
    )
    spread = " / ".join(f"{t.total / ideal:.2f}" for t in clis)
    print(
        f"  tracejudge score --json, the CLI from outside {cli:8.2f} s   {cli / ideal:.2f}x ideal,"
        f" {cli / floor:.2f}x floor  (runs: {spread}x)"
    )
    print(
        f"    its timeline (run at {mid.total:.2f} s): start -> first request {mid.to_first_request:.2f} s,"
        f" -> last reply {mid.first_request_to_last_reply:.2f} s"
        f" ({mid.first_request_to_last_reply / ideal:.2f}x ideal), -> exit {mid.last_reply_to_exit:.2f} s;"
        f" CPU {mid.cpu:.2f} s"
    )
    print(f"  tracejudge --help from outside {statistics.median(helps):8.3f} s  (median of 5)")
    if phx is not None:
        print(
            f"  arize-phoenix-evals         {phx:8.2f} s   {phx / ideal:.2f}x ideal, {phx / floor:.2f}x floor"
        )
    else:
        print(f"  arize-phoenix-evals         -- ({phx_note})")


if __name__ == "__main__":
    main()
