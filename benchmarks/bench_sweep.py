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

    python benchmarks/bench_sweep.py             # 10k and 100k traces
    python benchmarks/bench_sweep.py --quick     # 2k and 20k
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


def fill(db: Path, n: int) -> None:
    from tracejudge.store import SqliteStore

    store = SqliteStore(db)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    batch: list[object] = []
    for i in range(n):
        batch += _spans(i, start + timedelta(seconds=i * (365 * 86400 // n)))
        if len(batch) >= 3000:
            store.put_spans(batch)  # type: ignore[arg-type]
            batch = []
    if batch:
        store.put_spans(batch)  # type: ignore[arg-type]
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


def measure(n: int, repeat: int, work: Path) -> dict[str, dict[str, float]]:
    db = work / f"sweep-{n}.db"
    if not db.exists():
        t = time.perf_counter()
        fill(db, n)
        print(f"  filled {n:,} traces in {time.perf_counter() - t:.1f} s", flush=True)
    best: dict[str, dict[str, float]] = {}
    for _ in range(repeat):
        for kind in ("read", "sweep"):
            r = run_phase(kind, db)
            if kind not in best or r["seconds"] < best[kind]["seconds"]:
                best[kind] = r
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", choices=("read", "sweep"))
    ap.add_argument("--db")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--keep", type=Path, default=None, help="Folder to keep (and reuse) the stores in.")
    args = ap.parse_args()
    if args.phase:
        phase(args.phase, args.db)
        return
    sizes = (2_000, 20_000) if args.quick else (10_000, 100_000)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = []
        for n in sizes:
            best = measure(n, args.repeat, work)
            read, sw = best["read"], best["sweep"]
            assert sw["traces"] == n, sw
            assert sw["flagged"] == len(range(0, n, 10)), sw
            rows.append((n, read, sw))
            ratio = sw["seconds"] / read["seconds"]
            print(
                f"{n:>7,} traces: read+normalize {read['seconds']:.1f} s ({n / read['seconds']:,.0f}/s),"
                f" sweep {sw['seconds']:.1f} s ({n / sw['seconds']:,.0f}/s) = {ratio:.2f}x;"
                f" {int(sw['flagged']):,} flagged; peak RSS read {read['rss_mb']:.0f} MB,"
                f" sweep {sw['rss_mb']:.0f} MB",
                flush=True,
            )
        (small, _, s_small), (big, _, s_big) = rows
        low, high = s_small["rss_mb"], s_big["rss_mb"]
        print(f"sweep peak RSS {low:.0f} MB at {small:,} traces, {high:.0f} MB at {big:,}")


if __name__ == "__main__":
    main()
