"""OTLP intake benchmark: tracejudge's receiver against the cost of just decoding the payloads.

Generates realistic GenAI traces (OpenInference attributes: retrieved documents, chat messages with
context, tool calls; a few KB per span), encodes them as OTLP protobuf export requests of 512 spans,
and measures, each phase in its own process so peak memory is its own:

  ideal    parse each payload with the protobuf library and read every attribute once
  decode   tracejudge's decoder (payload -> RawSpan records), no HTTP, no store
  encode   what the receiver decodes: encode_protobuf (each span kept in its own OTLP bytes, its
           attributes read when it is read back; store schema 2)
  store-json  decode, then SqliteStore.put_spans per request (each span stored as its JSON, as the
           pulls store theirs), in-process (no HTTP)
  store    encode, then SqliteStore.put_spans per request, in-process (no HTTP)
  intake   the real receiver (the `serve` of `tracejudge collect otlp`, uvicorn on loopback) in a
           subprocess, fed over HTTP one request at a time (by a minimal HTTP/1.1 sender, each request
           written before the clock starts: the sender's work is not charged to the receiver, with
           which it shares the 2 cores); a request counts when its 200 arrives,
           i.e. when its spans are committed to SQLite (checked: once the last answer has come,
           this process reads every span and trace summary back through a read-only store while the
           receiver still runs, and fails if any is missing) -- with the default durability
           (synchronous=full: an acknowledged span survives power loss, each commit waits for the
           disk) and with synchronous=normal (it survives any crash of the process, not of the
           machine); the receiver counts its store transactions (commits per request)
  intake-4, intake-16  the same with 4 and 16 senders at once (each its own connection, the requests
           dealt round-robin): requests in flight together share a commit (group commit)
  intake-grown  intake into a store that already holds --grown traces (300,000 by default: their
           summaries and sessions, made directly, without spans): the new traces' entries land on
           random leaves of the trace-id index, which a fresh store (the other phases) keeps in a
           few pages; a receiver that has run a while pays for it on every commit
  intake-null, intake-file  the floors under intake: the same receiver and sender, its store's
           put_spans replaced -- by one that stores nothing (HTTP + encode), and by one that appends
           the request's spans (their OTLP bytes, as they arrived) to a file and syncs it
           (fdatasync) before it returns (what a durable store that keeps the bytes as they are must
           do at the least: write them once and wait for the disk once a request; the SQLite store
           keeps a trace's spans of a request compressed together, store schema 6, and writes less).
           For each intake phase, the MB the receiver wrote while it ran (/proc's write_bytes:
           for SQLite the WAL and the checkpoints' copies), and
           its event loop's CPU vs the ideal's (the main thread: uvicorn receiving and parsing the
           requests; decoding and storing run in other threads, after the body has arrived), and
           the time spent inside put_spans (the store's, or the floor's stand-in) as wall time vs
           the ideal's and as that thread's CPU vs the ideal's: its wall less its CPU is the wait
           for the disk's sync
  read-json, read  every trace read back (store.get_spans) from the store-json and store phases
           stores: what reading costs in each stored form
  normalize  every stored trace through tracejudge.normalize.normalize (read time, per trace)

Ratios are times relative to `ideal` (the quality bar: intake within 2x), as wall time and as CPU
time (of the process; for intake, of the receiver process, all its threads): on a shared machine the
wall time mostly measures the neighbours, CPU time the work. Each phase runs `--repeat` times,
interleaved with the others, and the fastest run counts. The "paired" column is the median, over the
rounds, of each round's wall time over that round's own ideal: the machine's speed drifts, and the
fastest ideal and the fastest intake may come from different moments. Peak memory is the process's maximum RSS
(for intake: the receiver).

    python benchmarks/bench_intake.py            # 10k and 100k spans
    python benchmarks/bench_intake.py --quick    # 10k only
    python benchmarks/bench_intake.py --quick --batch 32 --phases intake,intake-4,intake-16
                                                 # small exports from many senders: group commit
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

BATCH = 512
_PHASES = (
    "ideal",
    "decode",
    "encode",
    "store-json",
    "store",
    "read-json",
    "read",
    "intake",
    "intake-normal",
    "intake-4",
    "intake-16",
    "intake-null",
    "intake-file",
    "intake-grown",
)
SPANS_PER_TRACE = 6
GROWN_TRACES = 300_000
"""Traces already in the store of the intake-grown phase (--grown changes it)."""


# ---------------------------------------------------------------- payloads


def _paragraphs(rng: random.Random, n: int, words: int) -> list[str]:
    vocab = (
        "contract",
        "prepayment",
        "attachment",
        "clause",
        "supplier",
        "invoice",
        "shall",
        "not",
        "exceed",
        "amount",
        "region",
        "policy",
        "procurement",
        "approval",
        "limit",
        "version",
        "effective",
        "schedule",
        "delivery",
        "penalty",
        "currency",
        "RMB",
        "EUR",
        "the",
        "of",
        "and",
        "to",
        "in",
        "for",
        "with",
        "by",
        "on",
        "at",
        "from",
        "payment",
        "terms",
        "notice",
        "period",
        "renewal",
        "termination",
        "liability",
    )
    return [" ".join(rng.choice(vocab) for _ in range(words)) for _ in range(n)]


def generate(n_spans: int, out: Path, seed: int = 7, batch: int = BATCH) -> int:
    """Write length-prefixed ExportTraceServiceRequest payloads of ``batch`` spans; returns the byte size."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

    rng = random.Random(seed)
    docs = _paragraphs(rng, 300, 130)  # ~800 characters each
    questions = _paragraphs(rng, 100, 15)
    t0 = 1_790_000_000_000_000_000

    def put(span: Any, key: str, value: Any) -> None:
        v = AnyValue()
        if isinstance(value, bool):
            v.bool_value = value
        elif isinstance(value, int):
            v.int_value = value
        elif isinstance(value, float):
            v.double_value = value
        else:
            v.string_value = value
        span.attributes.add(key=key, value=v)

    def trace_spans(ss: Any, t: int) -> None:
        trace_id = rng.getrandbits(128).to_bytes(16, "big")
        ids = [rng.getrandbits(64).to_bytes(8, "big") for _ in range(SPANS_PER_TRACE)]
        start = t0 + t * 1_000_000_000
        question = rng.choice(questions)
        chosen = rng.sample(docs, 5)
        context = "\n\n".join(chosen[:4])
        answer = " ".join(chosen[0].split()[:60])

        def span(i: int, parent: int | None, name: str, kind: str) -> Any:
            sp = ss.spans.add(trace_id=trace_id, span_id=ids[i], name=name, kind=1)
            if parent is not None:
                sp.parent_span_id = ids[parent]
            sp.start_time_unix_nano = start + i * 1_000_000
            sp.end_time_unix_nano = start + (i + 1) * 50_000_000
            put(sp, "openinference.span.kind", kind)
            put(sp, "session.id", f"session-{t % 97}")
            return sp

        root = span(0, None, "agent.run", "AGENT")
        put(root, "input.value", question)
        put(root, "output.value", answer)
        put(root, "metadata", json.dumps({"tenant": "acme", "region": "CN", "user": f"u{t % 13}"}))
        ret = span(1, 0, "retrieve", "RETRIEVER")
        put(ret, "input.value", question)
        put(ret, "tracejudge.retrieval.filter", json.dumps({"region": "CN"}))
        for j, content in enumerate(chosen):
            p = f"retrieval.documents.{j}.document"
            put(ret, f"{p}.id", f"C-{rng.randint(1, 400)}/attachment")
            put(ret, f"{p}.content", content)
            put(ret, f"{p}.score", rng.random())
            put(ret, f"{p}.metadata", json.dumps({"version": f"v{rng.randint(1, 3)}", "region": "CN"}))
        ev = ret.events.add(name="retrieval.done", time_unix_nano=start + 40_000_000)
        ev.attributes.add(key="count", value=AnyValue(int_value=5))
        ctx = span(2, 0, "assemble_context", "CHAIN")
        put(ctx, "input.value", json.dumps({"documents": 5, "budget_tokens": 3000}))
        put(ctx, "output.value", context)
        llm = span(3, 0, "chat gpt-4.1-mini", "LLM")
        put(llm, "llm.model_name", "gpt-4.1-mini")
        put(llm, "llm.invocation_parameters", json.dumps({"temperature": 0, "max_tokens": 512}))
        put(llm, "llm.input_messages.0.message.role", "system")
        put(llm, "llm.input_messages.0.message.content", "Answer from the context only.\n\n" + context)
        put(llm, "llm.input_messages.1.message.role", "user")
        put(llm, "llm.input_messages.1.message.content", question)
        put(llm, "llm.output_messages.0.message.role", "assistant")
        put(llm, "llm.output_messages.0.message.content", answer)
        put(llm, "llm.token_count.prompt", rng.randint(800, 1500))
        put(llm, "llm.token_count.completion", rng.randint(40, 200))
        tool = span(4, 0, "submit_payment", "TOOL")
        put(tool, "tool.name", "submit_payment")
        put(tool, "input.value", json.dumps({"amount": rng.randint(1000, 90000), "currency": "RMB"}))
        put(tool, "output.value", json.dumps({"status": "escalated"}))
        guard = span(5, 3, "guardrail", "GUARDRAIL")
        put(guard, "output.value", "pass")
        put(guard, "guardrail.passed", True)

    total = 0
    t = 0
    with out.open("wb") as fh:
        remaining = n_spans
        while remaining > 0:
            req = ExportTraceServiceRequest()
            rs = req.resource_spans.add()
            for k, v in (("service.name", "procurement-agent"), ("deployment.environment", "prod")):
                rs.resource.attributes.add(key=k, value=AnyValue(string_value=v))
            ss = rs.scope_spans.add()
            ss.scope.name = "openinference.instrumentation.openai"
            ss.scope.version = "0.1.20"
            while len(ss.spans) < min(batch, remaining):
                trace_spans(ss, t)
                t += 1
            del ss.spans[min(batch, remaining) :]
            remaining -= len(ss.spans)
            data = req.SerializeToString()
            fh.write(len(data).to_bytes(4, "big") + data)
            total += len(data)
    return total


def frames(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while head := fh.read(4):
            yield fh.read(int.from_bytes(head, "big"))


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _Clock:
    """Wall and CPU seconds (this process, all threads) since it was made."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def result(self, spans: int, **extra: Any) -> dict[str, Any]:
        return {
            "spans": spans,
            "seconds": time.perf_counter() - self.wall,
            "cpu": time.process_time() - self.cpu,
            "rss_mb": _maxrss_mb(),
            **extra,
        }


# ---------------------------------------------------------------- phases (each in a child process)


def phase_ideal(path: Path) -> dict[str, Any]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    def read(v: Any) -> Any:
        kind = v.WhichOneof("value")
        if kind == "array_value":
            return [read(x) for x in v.array_value.values]
        if kind == "kvlist_value":
            return {kv.key: read(kv.value) for kv in v.kvlist_value.values}
        return getattr(v, kind) if kind else None

    spans = 0
    sink = 0
    clock = _Clock()
    for body in frames(path):
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        for rs in req.resource_spans:
            for kv in rs.resource.attributes:
                sink += len(kv.key) + (read(kv.value) is not None)
            for ss in rs.scope_spans:
                for sp in ss.spans:
                    spans += 1
                    sink += len(sp.trace_id) + len(sp.span_id) + len(sp.name)
                    for kv in sp.attributes:
                        sink += len(kv.key) + (read(kv.value) is not None)
                    for ev in sp.events:
                        for kv in ev.attributes:
                            sink += len(kv.key) + (read(kv.value) is not None)
    return clock.result(spans, sink=sink)


def _decoder(encode: bool) -> Any:
    # Imported by name: with --phases, this script also measures a tracejudge without encode_protobuf.
    import tracejudge_collectors.otel as otel

    return otel.encode_protobuf if encode else otel.decode_protobuf


def phase_decode(path: Path, encode: bool) -> dict[str, Any]:
    decoder = _decoder(encode)
    bodies = list(frames(path))
    spans = 0
    clock = _Clock()
    for body in bodies:
        spans += len(decoder(body).spans)
    return clock.result(spans)


def phase_store(path: Path, workdir: Path, encode: bool) -> dict[str, Any]:
    from tracejudge.store import open_store

    decoder = _decoder(encode)
    db = workdir / ("store.db" if encode else "store-json.db")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    store = open_store(f"sqlite:///{db}")
    bodies = list(frames(path))
    spans = 0
    clock = _Clock()
    for body in bodies:
        got = decoder(body).spans
        store.put_spans(got)
        spans += len(got)
    result = clock.result(spans)
    store.close()
    return result


def phase_read(workdir: Path, encode: bool) -> dict[str, Any]:
    """Every trace the store phase stored, read back (its spans as RawSpan records)."""
    from tracejudge.store import open_store

    store = open_store(f"sqlite:///{workdir / ('store.db' if encode else 'store-json.db')}")
    try:
        ids = list(store.iter_trace_ids())
        # The first read imports the protobuf classes the OTLP form is parsed with, once a process (~20 ms):
        # a trace is read before the clock starts, in both forms.
        store.get_spans(ids[0])
        spans = 0
        clock = _Clock()
        for trace_id in ids:
            spans += len(store.get_spans(trace_id))
        return clock.result(spans)
    finally:
        store.close()


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system, all threads) the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _loop_cpu_of(pid: int) -> float:
    """CPU seconds the process's main thread has used: the receiver's event loop (uvicorn reading and
    parsing the requests, answering them); its other threads decode and store."""
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_rss_of(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def serve_counting(store_url: str, floor: str | None = None) -> None:
    """The receiver child: ``serve`` (what ``tracejudge collect otlp`` runs) on a free port, its URL
    on stdout; at SIGTERM, how many store transactions it made and how many spans it took. With
    ``floor``, put_spans stores nothing ("null") or appends the spans' bytes to a file beside the
    store and syncs it ("file")."""
    import tracejudge_collectors.otel as otel
    from tracejudge.store import EncodedSpan, open_store

    store = open_store(store_url)
    commits, taken = [0], [0]
    sink = os.open(urlsplit(store_url).path + ".floor", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC)

    def append(spans: Any) -> int:
        # Each span's bytes as they arrived, and each resource and scope once (as the store keeps them).
        envelopes = dict.fromkeys(s.envelope for s in spans if isinstance(s, EncodedSpan))
        data = b"".join(
            (
                *(piece for e in envelopes for piece in (e.resource, e.scope)),
                *(s.span if isinstance(s, EncodedSpan) else s.model_dump_json().encode() for s in spans),
            )
        )
        os.write(sink, data)
        os.fdatasync(sink)
        return len(spans)

    # Wall and thread CPU seconds spent inside put_spans (the store's share of each request; the
    # group commit calls it on one thread at a time): wall minus CPU is the wait for the disk.
    in_store = [0.0, 0.0]

    def put(spans: Any, **kw: Any) -> int:
        if floor == "null":
            return len(spans)
        if floor == "file":
            return append(spans)
        return int(store.put_spans(spans, **kw))

    class Counting:
        def put_spans(self, spans: Any, **kw: Any) -> int:
            commits[0] += 1
            taken[0] += len(spans)
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return put(spans, **kw)
            finally:
                in_store[0] += time.perf_counter() - wall
                in_store[1] += time.thread_time() - cpu

        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

    otel.serve(Counting(), "127.0.0.1:0", on_ready=lambda url: print(f"listening {url}", flush=True))  # type: ignore[arg-type]
    store.close()
    os.close(sink)
    print(
        json.dumps(
            {"commits": commits[0], "spans": taken[0], "store_s": in_store[0], "store_cpu": in_store[1]}
        ),
        flush=True,
    )


def _written_of(pid: int) -> int:
    """Bytes the process has caused to be written to storage (/proc's write_bytes)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return 0


def _requests(url: str, bodies: list[bytes]) -> list[bytes]:
    """Each body as a whole HTTP/1.1 export request to ``url`` (written before the clock starts)."""
    where = urlsplit(url)
    head = f"POST {where.path} HTTP/1.1\r\nHost: {where.netloc}\r\nContent-Type: application/x-protobuf\r\n"
    return [f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body for body in bodies]


def _send_all(url: str, requests: list[bytes], senders: int) -> int:
    """Every request (:func:`_requests`) sent by ``senders`` threads at once (each its own
    keep-alive connection, the requests dealt round-robin); how many. Each is sent with one
    ``sendall`` and only the status line and Content-Length of its answer are read: the sender costs
    as little as it can (it runs on the 2 cores the receiver runs on), so the figure is the
    receiver's. An HTTP client library's own work per request (~1 ms of CPU in httpx) is, in
    practice, the sending machine's."""
    import threading

    where = urlsplit(url)
    host, port = where.hostname or "127.0.0.1", where.port or 80
    failures: list[str] = []

    def send(mine: list[bytes]) -> None:
        with socket.create_connection((host, port), timeout=120) as sock, sock.makefile("rb") as answers:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for request in mine:
                sock.sendall(request)
                status, length = answers.readline(), 0
                while (line := answers.readline()) not in (b"\r\n", b""):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                answer = answers.read(length)
                if status.split()[1:2] != [b"200"]:
                    failures.append(f"receiver answered {status.decode().strip()}: {answer[:200]!r}")

    if senders == 1:
        send(requests)
    else:
        threads = [threading.Thread(target=send, args=(requests[i::senders],)) for i in range(senders)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if failures:
        raise SystemExit(failures[0])
    return len(requests)


def _grown_store(workdir: Path, traces: int) -> Path:
    """A store holding ``traces`` traces of random ids (a summary each, a session for every third;
    no spans), made once per payload folder: what a receiver that has run a while has in its trace-id
    and sessions indexes."""
    from tracejudge.store import open_store

    db = workdir / f"grown-{traces}.db"
    if db.exists():
        return db
    part = Path(f"{db}.part")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{part}{suffix}").unlink(missing_ok=True)
    rng = random.Random(11)
    store = open_store(f"sqlite:///{part}")
    conn = store._conn  # type: ignore[attr-defined]
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO traces (seq, trace_id, name, start_ns, end_ns, span_count, sources, first_seen)"
        " VALUES (?, ?, 'earlier', ?, ?, 0, 'otlp', '2026-01-01T00:00:00+00:00')",
        ((i + 1, f"{rng.getrandbits(128):032x}", 10**18 + i, 10**18 + i + 5) for i in range(traces)),
    )
    conn.executemany(
        "INSERT INTO trace_sessions (trace_seq, session_id) VALUES (?, ?)",
        ((i + 1, f"earlier-{rng.getrandbits(48):012x}") for i in range(0, traces, 3)),
    )
    conn.execute("COMMIT")
    store.close()
    part.rename(db)
    return db


def phase_intake(
    path: Path,
    workdir: Path,
    synchronous: str = "full",
    senders: int = 1,
    floor: str | None = None,
    grown: int = 0,
) -> dict[str, Any]:
    from tracejudge.store import open_store

    db = workdir / "intake.db"
    for suffix in ("", "-wal", "-shm", ".floor"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    if grown:
        shutil.copyfile(_grown_store(workdir, grown), db)
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    proc = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--child",
            "receiver",
            "--store",
            f"sqlite:///{db}?synchronous={synchronous}",
            *(["--floor", floor] if floor else []),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(60):
            raise SystemExit("the receiver did not start")
        url = proc.stdout.readline().split()[-1] + "/v1/traces"
        prepared = _requests(url, list(frames(path)))
        cpu, loop, written = _cpu_of(proc.pid), _loop_cpu_of(proc.pid), _written_of(proc.pid)
        start = time.perf_counter()
        requests = _send_all(url, prepared, senders)
        seconds = time.perf_counter() - start
        cpu = _cpu_of(proc.pid) - cpu
        loop = _loop_cpu_of(proc.pid) - loop
        written = _written_of(proc.pid) - written
        rss = _peak_rss_of(proc.pid)
        # The clock stopped at the last answer: every span must be readable from another process by
        # then (from this one, through a read-only store, while the receiver still runs).
        readable = None if floor else _readable(db, grown=bool(grown))
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    counts = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    commits = counts.get("commits")
    store_s, store_cpu = counts.get("store_s"), counts.get("store_cpu")
    if floor:
        stored, norm = counts.get("spans", 0), None
    else:
        store = open_store(f"sqlite:///{db}")
        try:
            stored = sum(t.span_count for t in store.list_traces())
            norm = None if grown else _normalize_all(store)
        finally:
            store.close()
    if readable is not None and readable != (stored, stored):
        raise SystemExit(
            f"{readable} spans (rows, summaries) of {stored} were readable from another process"
            " when the last answer came"
        )
    return {
        "spans": stored,
        "seconds": seconds,
        "cpu": cpu,
        "rss_mb": rss,
        "requests": requests,
        "commits": commits,
        "written_mb": written / 1e6,
        "loop_cpu": loop,
        "store_s": store_s,
        "store_cpu": store_cpu,
        "normalize": norm,
    }


def _readable(db: Path, *, grown: bool = False) -> tuple[int, int]:
    """What another process reads from the store at ``db`` now: its spans, read back trace by trace,
    and the span count its trace summaries add up to. In a ``grown`` store only the traces whose
    summaries count spans are read (the others were made without any)."""
    from tracejudge.store import open_store

    store = open_store(f"sqlite:///{db}", read_only=True)
    try:
        summaries = store.list_traces()
        summed = sum(t.span_count for t in summaries)
        ids = [t.trace_id for t in summaries if t.span_count] if grown else store.iter_trace_ids()
        rows = sum(len(store.get_spans(trace_id)) for trace_id in ids)
    finally:
        store.close()
    return rows, summed


def _normalize_all(store: Any) -> dict[str, Any] | None:
    try:
        from tracejudge.normalize import normalize
    except ImportError:
        return None
    traces = spans = 0
    clock = _Clock()
    for trace_id in store.iter_trace_ids():
        got = store.get_spans(trace_id)
        normalize(got)
        traces += 1
        spans += len(got)
    return clock.result(spans, traces=traces)


def run_child(phase: str, path: Path, grown: int = GROWN_TRACES) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", phase, "--payloads", str(path), "--grown", str(grown)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run_phase(phase: str, path: Path, grown: int = GROWN_TRACES) -> dict[str, Any]:
    """One phase, in this (child) process."""
    workdir = path.parent
    if phase == "ideal":
        return phase_ideal(path)
    if phase in ("decode", "encode"):
        return phase_decode(path, phase == "encode")
    if phase in ("store-json", "store"):
        return phase_store(path, workdir, phase == "store")
    if phase in ("read-json", "read"):
        return phase_read(workdir, phase == "read")
    if phase == "intake-normal":
        return phase_intake(path, workdir, "normal")
    if phase in ("intake-4", "intake-16"):
        return phase_intake(path, workdir, senders=int(phase.split("-")[1]))
    if phase in ("intake-null", "intake-file"):
        return phase_intake(path, workdir, floor=phase.split("-")[1])
    if phase == "intake-grown":
        return phase_intake(path, workdir, grown=grown)
    return phase_intake(path, workdir)


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="10k spans only")
    parser.add_argument("--sizes", type=int, nargs="*", help="span counts (default 10000 100000)")
    parser.add_argument(
        "--batch", type=int, default=BATCH, help="spans per export request (an SDK's batch; default 512)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per phase; the fastest counts")
    parser.add_argument(
        "--phases",
        help="comma-separated phases to run (default all; ideal always runs), e.g. ideal,decode,"
        "store-json,intake to measure a tracejudge before encode_protobuf with this same script",
    )
    parser.add_argument(
        "--grown",
        type=int,
        default=GROWN_TRACES,
        help=f"traces already in the store of intake-grown (default {GROWN_TRACES:,})",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--payloads", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--floor", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child == "receiver":
        serve_counting(args.store, args.floor)
        return
    if args.child:
        print(json.dumps(run_phase(args.child, args.payloads, args.grown)))
        return

    sizes = args.sizes or ([10_000] if args.quick else [10_000, 100_000])
    rows: list[tuple[str, ...]] = []
    with tempfile.TemporaryDirectory(prefix="tj-bench-") as tmp:
        for n in sizes:
            path = Path(tmp) / f"payloads-{n}.bin"
            size = generate(n, path, batch=args.batch)
            print(
                f"{n} spans: {size / 1e6:.1f} MB of OTLP protobuf in {-(-n // args.batch)} requests "
                f"({size / n / 1024:.1f} KB per span)",
                flush=True,
            )
            names = [
                phase
                for phase in _PHASES
                if phase == "ideal" or not args.phases or phase in args.phases.split(",")
            ]
            best: dict[str, dict[str, Any]] = {}
            # Each round's wall time of each phase over the same round's ideal: the machine's speed
            # drifts (the ideal alone varied 0.107-0.189 s in one process), and a phase measured beside
            # its own round's ideal is compared at about the same speed, where the fastest of each
            # phase may come from different moments.
            paired: dict[str, list[float]] = {}
            round_ideal = 1.0  # the ideal runs first in each round
            for _ in range(max(1, args.repeat)):
                for phase in names:
                    r = run_child(phase, path, args.grown)
                    assert r["spans"] == n, (phase, r["spans"])
                    if phase == "ideal":
                        round_ideal = r["seconds"]
                    paired.setdefault(phase, []).append(r["seconds"] / round_ideal)
                    r["phase"] = phase
                    if phase not in best or r["seconds"] < best[phase]["seconds"]:
                        # The fastest wall time, with the least CPU time of any run beside it.
                        r["cpu"] = min(r["cpu"], best[phase]["cpu"]) if phase in best else r["cpu"]
                        best[phase] = r
                    else:
                        best[phase]["cpu"] = min(best[phase]["cpu"], r["cpu"])
            ideal, intake = best["ideal"], best.get("intake")

            base, base_cpu = ideal["seconds"], ideal["cpu"]
            phases: tuple[tuple[str, dict[str, Any] | None], ...] = (
                ("ideal (protobuf parse + read attrs)", ideal),
                ("tracejudge decode (to RawSpan)", best.get("decode")),
                ("tracejudge encode (the receiver's)", best.get("encode")),
                ("decode + SQLite store as JSON", best.get("store-json")),
                ("encode + SQLite store, no HTTP", best.get("store")),
                ("tracejudge intake (HTTP+encode+SQLite)", intake),
                ("  same, synchronous=normal", best.get("intake-normal")),
                ("  same, 4 senders at once", best.get("intake-4")),
                ("  same, 16 senders at once", best.get("intake-16")),
                ("  floor: receiver storing nothing (HTTP+encode)", best.get("intake-null")),
                ("  floor: spans appended to a file + fdatasync", best.get("intake-file")),
                (f"  same, into a store of {args.grown:,} traces", best.get("intake-grown")),
                ("read back every trace, JSON form", best.get("read-json")),
                ("read back every trace, OTLP form", best.get("read")),
            )
            for name, r in phases:
                if r is None:
                    continue
                if r.get("commits") is not None:
                    per_request = r["commits"] / r["requests"]
                    name += (
                        f" [{per_request:.2f} commits/request, {r['written_mb']:.0f} MB written,"
                        f" event loop {r['loop_cpu'] / base_cpu:.2f}x CPU"
                    )
                    if r.get("store_s") is not None:
                        name += (
                            f", put_spans {r['store_s'] / base:.2f}x wall"
                            f" / {r['store_cpu'] / base_cpu:.2f}x CPU"
                        )
                    name += "]"
                rows.append(
                    (
                        f"{n:,}",
                        name,
                        f"{r['seconds']:.2f}",
                        f"{n / r['seconds']:,.0f}",
                        f"{r['seconds'] / base:.2f}x",
                        f"{statistics.median(paired[r['phase']]):.2f}x",
                        f"{r['cpu'] / base_cpu:.2f}x",
                        f"{r['rss_mb']:.0f}",
                    )
                )
            norm = intake.get("normalize") if intake else None
            if norm:
                rows.append(
                    (
                        f"{n:,}",
                        f"normalize {norm['traces']:,} traces (read time)",
                        f"{norm['seconds']:.2f}",
                        f"{norm['spans'] / norm['seconds']:,.0f}",
                        f"{norm['seconds'] / base:.2f}x",
                        "",
                        f"{norm['cpu'] / base_cpu:.2f}x",
                        f"{norm['rss_mb']:.0f}",
                    )
                )
    header = ("spans", "phase", "seconds", "spans/s", "vs ideal", "paired", "CPU vs ideal", "peak RSS MB")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print()
    for r in [header, tuple("-" * w for w in widths), *rows]:
        print(
            "  ".join(
                c.ljust(w) if i == 1 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )


if __name__ == "__main__":
    main()
