"""Intake fuzz run (issue 17): mutated OTLP requests through the receiver app, with counts.

Valid OTLP protobuf and OTLP/JSON trace and log export requests are mutated at random (bit flips,
cuts, deletions, duplications, splices of hostile fragments: lone surrogates raw and escaped,
invalid UTF-8, bidi and escape sequences, nesting thousands deep, 5,000-digit numbers, long names,
zero ids), optionally gzip-compressed, and sent through the receiver's ASGI app in-process (the same
app `tracejudge collect otlp` serves) with the default limits; before them, the large hostile bodies
of the finding (a gzip bomb of 800k tiny spans, 57 MiB inflated: under the body limit, refused by
the decode estimate; one of 1 GiB of zeros, stopped at the body limit while inflating; 20 MB of
tiny spans, 100k attribute keys). Prints:

  requests tried, answers by status, 5xx (goal 0), crashes (exceptions out of the app; goal 0),
  peak RSS growth per request against the body limit (maximum, 99th percentile, median, and the
  request that made the maximum), the whole run's peak RSS growth, and acknowledged spans lost (a 200
  whose valid, unrejected spans are not all in the store; goal 0).

Per request, the kernel's high-water mark is reset first (``5`` to ``/proc/self/clear_refs``), so
``VmHWM`` after the request less ``VmRSS`` before it is what that one request added at its peak —
native allocations (protobuf, zlib, SQLite) included, which tracemalloc would not see. Linux only.

    python benchmarks/fuzz_intake.py                 # 20,000 requests
    python benchmarks/fuzz_intake.py --requests 2000 --seed 7
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import random
import re
import sys
import tempfile
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.testclient import TestClient

from tracejudge.store import SqliteStore
from tracejudge_collectors.otel import DEFAULT_MAX_BODY_BYTES, build_app

FRAGMENTS = [
    b"\xed\xa0\x80",
    b"\\udc00",
    b"\\ud800\\u0041",
    b"\xff\xfe",
    b"[" * 10_000,
    b"{" * 10_000,
    b"9" * 5000,
    b"\x00" * 16,
    b'"' + b"k" * 100_000 + b'"',
    b"\x1b]0;t\x07\x1b[2J",
    b"\xe2\x80\xae",
    b'{"resourceSpans": [{"scopeSpans": [{"spans": [',
    b'"traceId": "00000000000000000000000000000000"',
    b"\x0a\xff\xff\xff\xff\x0f",
    b"\x12\x80\x80\x80\x80\x08",
]


def status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        found = re.search(rf"^{field}:\s+(\d+) kB", fh.read(), re.M)
    assert found, field
    return int(found.group(1))


class PeakPerRequest:
    """Peak RSS one request adds: reset the high-water mark, note RSS, then read the mark after."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, str]] = []
        self.start_kib = status_kib("VmRSS")
        self.top_kib = self.start_kib
        self._before = 0

    def start(self) -> None:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        self._before = status_kib("VmRSS")

    def stop(self, what: str) -> float:
        high = status_kib("VmHWM")
        self.top_kib = max(self.top_kib, high)
        grown = max(0, high - self._before) / 1024
        self.samples.append((grown, what))
        return grown

    def percentile(self, q: float) -> float:
        ordered = sorted(g for g, _ in self.samples)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def seed_trace(rng: random.Random, n: int) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "agent"
    ss = rs.scope_spans.add()
    ss.scope.name = "fuzz"
    tid = rng.getrandbits(128).to_bytes(16, "big")
    for i in range(n):
        sp = ss.spans.add(trace_id=tid, span_id=rng.getrandbits(64).to_bytes(8, "big"), name=f"span-{i}")
        sp.start_time_unix_nano = 1_700_000_000_000_000_000 + i
        sp.end_time_unix_nano = sp.start_time_unix_nano + 1000
        sp.attributes.add(key="input.value").value.string_value = f"question {i} " * rng.randint(1, 20)
        kv = sp.attributes.add(key="docs").value.kvlist_value.values.add(key="id")
        kv.value.string_value = f"d{i}"
    return req


def seed_logs(rng: random.Random, n: int) -> ExportLogsServiceRequest:
    req = ExportLogsServiceRequest()
    sl = req.resource_logs.add().scope_logs.add()
    for _ in range(n):
        lr = sl.log_records.add(
            trace_id=rng.getrandbits(128).to_bytes(16, "big"),
            span_id=rng.getrandbits(64).to_bytes(8, "big"),
            event_name="gen_ai.user.message",
        )
        lr.body.string_value = "hello"
    return req


def to_json(req: Any) -> bytes:
    doc = json_format.MessageToDict(req, use_integers_for_enums=True)
    for top in doc.get("resourceSpans", []) + doc.get("resourceLogs", []):
        for scope in top.get("scopeSpans", []) + top.get("scopeLogs", []):
            for item in scope.get("spans", []) + scope.get("logRecords", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in item:
                        item[key] = base64.b64decode(item[key]).hex()
    return json.dumps(doc).encode()


def mutate(rng: random.Random, body: bytes) -> bytes:
    buf = bytearray(body)
    for _ in range(rng.randint(0, 5)):
        kind = rng.choice(["flip", "cut", "splice", "splice", "delete", "duplicate"])
        at = rng.randint(0, max(0, len(buf) - 1))
        if kind == "flip" and buf:
            buf[at] ^= 1 << rng.randint(0, 7)
        elif kind == "cut":
            del buf[at:]
        elif kind == "splice":
            buf[at:at] = rng.choice(FRAGMENTS)
        elif kind == "delete":
            del buf[at : at + rng.randint(1, 16)]
        else:
            buf[at:at] = buf[at : at + rng.randint(1, 256)]
    return bytes(buf)


def valid_span_ids(body: bytes, as_json: bool) -> set[tuple[str, str]]:
    """(trace id, span id) of the spans a trace request validly holds, read without our decoder."""
    out: set[tuple[str, str]] = set()
    if not as_json:
        try:
            req = ExportTraceServiceRequest.FromString(body)
        except DecodeError:
            return out
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                for sp in ss.spans:
                    if (
                        len(sp.trace_id) == 16
                        and any(sp.trace_id)
                        and len(sp.span_id) == 8
                        and any(sp.span_id)
                    ):
                        out.add((sp.trace_id.hex(), sp.span_id.hex()))
        return out
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return out
    if not isinstance(doc, dict):
        return out
    for rs in doc.get("resourceSpans") or []:
        for ss in (rs.get("scopeSpans") or []) if isinstance(rs, dict) else []:
            for sp in (ss.get("spans") or []) if isinstance(ss, dict) else []:
                if not isinstance(sp, dict):
                    continue
                tid, sid = sp.get("traceId"), sp.get("spanId")
                if isinstance(tid, str) and isinstance(sid, str) and len(tid) == 32 and len(sid) == 16:
                    try:
                        if int(tid, 16) and int(sid, 16):
                            out.add((tid.lower(), sid.lower()))
                    except ValueError:
                        continue
    return out


def rejected_spans(resp: Any, as_json: bool) -> int:
    if as_json:
        return int(resp.json().get("partialSuccess", {}).get("rejectedSpans", 0))
    return int(ExportTraceServiceResponse.FromString(resp.content).partial_success.rejected_spans)


def _zeros_gzip(n: int) -> bytes:
    """``n`` zero bytes gzip-compressed, made a MiB at a time (about n / 1000 bytes)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    mib = bytes(1 << 20)
    return b"".join([*(comp.compress(mib) for _ in range(n >> 20)), comp.flush()])


def hostile_bodies() -> list[tuple[str, bytes, dict[str, str]]]:
    tiny = b'{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"00f067aa0ba902b7"}'
    head, tail = b'{"resourceSpans":[{"scopeSpans":[{"spans":[', b"]}]}]}"
    keys = [{"key": f"k{i}", "value": {"intValue": "1"}} for i in range(100_000)]
    many_keys = {"resourceSpans": [{"scopeSpans": [{"spans": [{**json.loads(tiny), "attributes": keys}]}]}]}
    js = {"Content-Type": "application/json"}
    return [
        (
            "gzip bomb: 800k tiny spans",
            gzip.compress(head + b",".join([tiny] * 800_000) + tail),
            {**js, "Content-Encoding": "gzip"},
        ),
        ("gzip bomb: 1 GiB of zeros", _zeros_gzip(1 << 30), {**js, "Content-Encoding": "gzip"}),
        ("20 MB of tiny spans", head + b",".join([tiny] * 270_000) + tail, js),
        ("100k attribute keys", json.dumps(many_keys).encode(), js),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    statuses: Counter[int] = Counter()
    crashes = lost = acked = 0
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "fuzz.db")
        app = build_app(store)
        peaks = PeakPerRequest()
        started = time.perf_counter()
        with TestClient(app, raise_server_exceptions=True) as client:
            for name, body, headers in hostile_bodies():
                peaks.start()
                resp = client.post("/v1/traces", content=body, headers=headers)
                grown = peaks.stop(name)
                statuses[resp.status_code] += 1
                print(
                    f"  {name}: {len(body) / 2**20:.1f} MiB sent -> {resp.status_code}; "
                    f"peak RSS growth {grown:.1f} MiB",
                    file=sys.stderr,
                )
            for i in range(args.requests):
                logs = rng.random() < 0.2
                req = seed_logs(rng, rng.randint(1, 8)) if logs else seed_trace(rng, rng.randint(1, 20))
                as_json = rng.random() < 0.5
                body = mutate(rng, to_json(req) if as_json else req.SerializeToString())
                headers = {"Content-Type": "application/json" if as_json else "application/x-protobuf"}
                sent = body
                if rng.random() < 0.2:
                    headers["Content-Encoding"] = "gzip"
                    sent = gzip.compress(body)
                peaks.start()
                try:
                    resp = client.post("/v1/logs" if logs else "/v1/traces", content=sent, headers=headers)
                except Exception as exc:  # an exception out of the app is a crash
                    crashes += 1
                    print(f"crash on request {i}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    continue
                finally:
                    peaks.stop(f"mutated request {i} ({len(sent):,} bytes)")
                statuses[resp.status_code] += 1
                if resp.status_code == 200 and not logs:
                    expected = valid_span_ids(body, as_json)
                    acked += len(expected)
                    missing = sum(
                        1 for tid, sid in expected if not any(s.span_id == sid for s in store.get_spans(tid))
                    )
                    lost += max(0, missing - rejected_spans(resp, as_json))
        elapsed = time.perf_counter() - started
        store.close()
    tried = sum(statuses.values()) + crashes
    # The reset also resets getrusage's ru_maxrss, so the run's peak is the highest mark seen.
    growth = (peaks.top_kib - peaks.start_kib) / 1024
    limit_mib = DEFAULT_MAX_BODY_BYTES / 2**20
    print(f"requests tried          {tried} ({elapsed:.0f} s, seed {args.seed})")
    print("answers                 " + ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items())))
    print(f"5xx                     {sum(v for k, v in statuses.items() if k >= 500)}")
    print(f"crashes                 {crashes}")
    top, top_what = max(peaks.samples)
    print(
        f"peak RSS per request    max {top:.1f} MiB = {top / limit_mib:.2f} x the {limit_mib:.0f} MiB body "
        f"limit ({top_what}); p99 {peaks.percentile(0.99):.2f} MiB = "
        f"{peaks.percentile(0.99) / limit_mib:.3f} x; median {peaks.percentile(0.5):.2f} MiB"
    )
    mutated, mutated_what = max((g, w) for g, w in peaks.samples if w.startswith("mutated"))
    print(f"  of mutated requests    max {mutated:.1f} MiB = {mutated / limit_mib:.3f} x ({mutated_what})")
    print(
        f"peak RSS growth, run    {growth:.0f} MiB = {growth / limit_mib:.1f} x the "
        f"{limit_mib:.0f} MiB body limit"
    )
    print(f"acknowledged spans      {acked}")
    print(f"acknowledged spans lost {lost}")


if __name__ == "__main__":
    main()
