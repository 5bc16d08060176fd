"""Sweep benchmark: ``triage --sweep`` over stored traces, against reading and normalizing them.

Fills a SQLite store with N small RAG traces (an OpenInference AGENT root, a RETRIEVER returning two
versions of a contract attachment, an LLM call whose input holds them; about 4 KB per trace), one
in ten answering with the superseded version's cap, start times spread over 2026. Then, each phase
in its own process so that its peak memory is its own:

  read    every stored trace: ``store.get_spans`` then ``normalize`` (the floor: a sweep must do this)
  sweep   ``tracejudge.sweep.iter_sweep`` over the same store (reads, normalizes, flags, drafts tickets)

and prints sweep time as a ratio to read time (CPU time of the process: on a shared machine wall time
mostly measures the neighbours), traces per CPU-second, and peak RSS at N/10 and at N
(memory flat in the number of traces: the sweep holds one trace at a time; the flags it yields are
counted, not kept). Each phase runs ``--repeat`` times, interleaved; the fastest counts.

The store holds each span as JSON (what the Langfuse and Phoenix pulls and ``collect file`` store), or
with ``--form otlp`` as the OTLP receiver stores it: the same spans sent as OTLP protobuf requests
through ``encode_protobuf``, each kept in its own OTLP bytes (store schema 2) and decoded when read.
``--form both`` measures the two stores interleaved and prints the OTLP form's phases as ratios to
the JSON form's.

    python benchmarks/bench_sweep.py             # 10k and 100k traces
    python benchmarks/bench_sweep.py --quick     # 2k and 20k
    python benchmarks/bench_sweep.py --quick --sizes 20000 --form both
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

V1 = (
    "Attachment to supply agreement C-17, payment schedule. Prepayment shall not exceed 50,000 RMB per"
    " order. The balance is due within sixty days of delivery."
)
V2 = (
    "Revised payment schedule, effective 1 March 2026. Quality claims must be raised within fourteen"
    " days of delivery. Prepayment shall not exceed 30,000 RMB per order."
)
RIGHT = "The prepayment cap is 30,000 RMB per order, per the revised payment schedule."
STALE = "The prepayment cap is 50,000 RMB per order, per the payment schedule."
QUESTION = "What is the prepayment cap for Huadong Steel under contract C-17?"


def manifest() -> list[dict[str, object]]:
    return [
        {"doc_id": "C-17/attachment", "version": "v1", "effective_from": "2025-01-01T00:00:00Z",
         "effective_to": "2026-03-01T00:00:00Z", "indexed_at": "2025-01-02T00:00:00Z", "content": V1},
        {"doc_id": "C-17/attachment", "version": "v2", "effective_from": "2026-03-01T00:00:00Z",
         "indexed_at": "2026-03-02T00:00:00Z", "content": V2},
    ]  # fmt: skip


def _spans(i: int, start: datetime) -> list[object]:
    from tracejudge.schema import RawSpan

    trace_id = f"{i + 1:032x}"
    t0 = int(start.timestamp() * 1e9)
    docs = [("v1", V1), ("v2", V2)] if i % 3 else [("v2", V2), ("v1", V1)]
    retr: dict[str, object] = {"openinference.span.kind": "RETRIEVER", "input.value": QUESTION}
    for k, (version, text) in enumerate(docs):
        p = f"retrieval.documents.{k}.document."
        retr[p + "id"] = f"C-17/attachment@{version}"
        retr[p + "content"] = text
        retr[p + "metadata"] = json.dumps({"doc_id": "C-17/attachment", "version": version})
    context = "\n".join(t for _, t in docs)
    # One in ten answers wrong for its time: the other version's cap (v1 applied until 1 March 2026).
    right = RIGHT if start >= datetime(2026, 3, 1, tzinfo=UTC) else STALE
    answer = right if i % 10 else (STALE if right == RIGHT else RIGHT)
    llm = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4.1-mini",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "Answer from the context only.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": f"Context:\n{context}\nQuestion: {QUESTION}",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": answer,
    }
    root = {"openinference.span.kind": "AGENT", "input.value": QUESTION, "output.value": answer}
    rows = [("agent", None, root), ("retrieve", 1, retr), ("ChatCompletion", 1, llm)]
    return [
        RawSpan(
            trace_id=trace_id,
            span_id=f"{i + 1:012x}{n + 1:04x}",
            parent_span_id=f"{i + 1:012x}{parent:04x}" if parent else None,
            name=name,
            start_time_unix_nano=t0 + n * 1_000_000,
            end_time_unix_nano=t0 + 900_000_000 - n * 1_000_000,
            attributes=attrs,
        )
        for n, (name, parent, attrs) in enumerate(rows)
    ]


def _as_otlp(spans: list[object]) -> list[object]:
    """The spans as the OTLP receiver stores them: one protobuf export request through encode_protobuf."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from tracejudge.store import EncodedSpan
    from tracejudge_collectors.otel import encode_protobuf

    req = ExportTraceServiceRequest()
    ss = req.resource_spans.add().scope_spans.add()
    for span in spans:
        sp = ss.spans.add(
            trace_id=bytes.fromhex(span.trace_id),  # type: ignore[attr-defined]
            span_id=bytes.fromhex(span.span_id),  # type: ignore[attr-defined]
            parent_span_id=bytes.fromhex(span.parent_span_id or ""),  # type: ignore[attr-defined]
            name=span.name,  # type: ignore[attr-defined]
            start_time_unix_nano=span.start_time_unix_nano,  # type: ignore[attr-defined]
            end_time_unix_nano=span.end_time_unix_nano,  # type: ignore[attr-defined]
        )
        for key, value in span.attributes.items():  # type: ignore[attr-defined]
            sp.attributes.add(key=key).value.string_value = value
    encoded: list[object] = list(encode_protobuf(req.SerializeToString()).spans)
    assert all(isinstance(s, EncodedSpan) for s in encoded)
    return encoded


def fill(db: Path, n: int, form: str = "json") -> None:
    from tracejudge.store import SqliteStore

    store = SqliteStore(db)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    batch: list[object] = []
    for i in range(n):
        batch += _spans(i, start + timedelta(seconds=i * (365 * 86400 // n)))
        if len(batch) >= 3000 or i == n - 1:
            store.put_spans(_as_otlp(batch) if form == "otlp" else batch)  # type: ignore[arg-type]
            batch = []
    store.close()


def phase(kind: str, db: str) -> None:
    """Run one phase in this process and print its JSON result."""
    from tracejudge.normalize import normalize
    from tracejudge.schema import ManifestEntry
    from tracejudge.store import SqliteStore
    from tracejudge.sweep import iter_sweep

    store = SqliteStore(db)
    t, cpu = time.perf_counter(), time.process_time()
    traces = flagged = 0
    if kind == "read":
        for trace_id in store.iter_trace_ids():
            normalize(store.get_spans(trace_id))
            traces += 1
    else:
        entries = [ManifestEntry.model_validate(m) for m in manifest()]
        for item in iter_sweep(store, entries):
            if isinstance(item, int):
                traces = item
            else:
                flagged += 1
    wall, seconds = time.perf_counter() - t, time.process_time() - cpu
    store.close()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps({"seconds": seconds, "wall": wall, "traces": traces, "flagged": flagged, "rss_mb": rss_mb})
    )


def run_phase(kind: str, db: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--phase", kind, "--db", str(db)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def measure(
    n: int, repeat: int, work: Path, forms: tuple[str, ...]
) -> dict[str, dict[str, dict[str, float]]]:
    """The fastest run of each phase on the store of each form (runs interleaved across forms)."""
    dbs = {form: work / (f"sweep-{n}.db" if form == "json" else f"sweep-{n}-{form}.db") for form in forms}
    for form, db in dbs.items():
        if not db.exists():
            t = time.perf_counter()
            fill(db, n, form)
            print(f"  filled {n:,} traces ({form} form) in {time.perf_counter() - t:.1f} s", flush=True)
    best: dict[str, dict[str, dict[str, float]]] = {form: {} for form in forms}
    for _ in range(repeat):
        for form, db in dbs.items():
            for kind in ("read", "sweep"):
                r = run_phase(kind, db)
                if kind not in best[form] or r["seconds"] < best[form][kind]["seconds"]:
                    best[form][kind] = r
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", choices=("read", "sweep"))
    ap.add_argument("--db")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--keep", type=Path, default=None, help="Folder to keep (and reuse) the stores in.")
    ap.add_argument("--sizes", type=int, nargs="*", help="trace counts (default 10000 100000)")
    ap.add_argument(
        "--form",
        choices=("json", "otlp", "both"),
        default="json",
        help="how the store holds the spans: as JSON, as the OTLP receiver stores them, or both compared",
    )
    args = ap.parse_args()
    if args.phase:
        phase(args.phase, args.db)
        return
    sizes = args.sizes or ((2_000, 20_000) if args.quick else (10_000, 100_000))
    forms = ("json", "otlp") if args.form == "both" else (args.form,)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = []
        for n in sizes:
            best = measure(n, args.repeat, work, forms)
            for form in forms:
                read, sw = best[form]["read"], best[form]["sweep"]
                assert sw["traces"] == n, sw
                assert sw["flagged"] == len(range(0, n, 10)), sw
                rows.append((n, read, sw))
                ratio = sw["seconds"] / read["seconds"]
                print(
                    f"{n:>7,} traces ({form} form): read+normalize {read['seconds']:.1f} s"
                    f" ({n / read['seconds']:,.0f}/s), sweep {sw['seconds']:.1f} s"
                    f" ({n / sw['seconds']:,.0f}/s) = {ratio:.2f}x; {int(sw['flagged']):,} flagged;"
                    f" peak RSS read {read['rss_mb']:.0f} MB, sweep {sw['rss_mb']:.0f} MB",
                    flush=True,
                )
            if len(forms) == 2:
                js, ot = best["json"], best["otlp"]
                print(
                    f"{n:>7,} traces: OTLP form vs JSON form, read+normalize"
                    f" {ot['read']['seconds'] / js['read']['seconds']:.2f}x,"
                    f" sweep {ot['sweep']['seconds'] / js['sweep']['seconds']:.2f}x",
                    flush=True,
                )
        if len(sizes) == 2 and len(forms) == 1:
            (small, _, s_small), (big, _, s_big) = rows
            low, high = s_small["rss_mb"], s_big["rss_mb"]
            print(f"sweep peak RSS {low:.0f} MB at {small:,} traces, {high:.0f} MB at {big:,}")


if __name__ == "__main__":
    main()
