"""What a pull's per-trace markers (meta ``phoenix.trace:<id>``, ``langfuse.trace:<id>``) cost a SQLite
store that already holds many: their keys are trace ids, random, so each lands on its own leaf page of
the meta table's key index, and every page a commit touches goes to the WAL whole (16 KiB).

A store of ``--traces`` traces (4 spans each) and their markers is built once; then, in interleaved
rounds on copies of it, ``put_spans`` of ``--batch`` new traces: without markers, with markers keyed
as today (by trace id), and with markers keyed in arrival order (a counter first: the bound that keys
made for locality could reach). Prints the CPU per put (``time.process_time``, median) and per marker,
the WAL bytes a put writes (median), and the load.

Run: .venv/bin/python benchmarks/bench_markers.py [--traces 50000] [--batch 50] [--rounds 40]
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from tracejudge.schema import RawSpan
from tracejudge.store import SqliteStore

# A Phoenix pull's marker as it writes one (see tracejudge_collectors.phoenix._pull).
MARKER = (
    '{"project":"default","seen_at":"2026-12-02T03:00:00.123456+00:00","end_ns":1790000000000000000,'
    '"spans":4,"complete":true,"attempts":1}'
)
KINDS = ("none", "by trace id", "in arrival order")


def _spans(trace_id: str) -> list[RawSpan]:
    return [
        RawSpan(
            trace_id=trace_id,
            span_id=f"{i + 1:016x}",
            parent_span_id=None if i == 0 else f"{1:016x}",
            name=f"step {i}",
            start_time_unix_nano=1_790_000_000_000_000_000 + i,
            end_time_unix_nano=1_790_000_000_000_000_100 + i,
            attributes={"input.value": "x" * 200},
        )
        for i in range(4)
    ]


def _build(path: Path, traces: int, rng: random.Random) -> None:
    store = SqliteStore(f"{path}?synchronous=normal")
    try:
        for _ in range(0, traces, 1000):
            ids = [f"{rng.getrandbits(128):032x}" for _ in range(1000)]
            store.put_spans(
                [s for t in ids for s in _spans(t)], meta={f"phoenix.trace:{t}": MARKER for t in ids}
            )
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--traces", type=int, default=50_000, help="traces (and markers) in the store first")
    parser.add_argument("--batch", type=int, default=50, help="traces per put (a Phoenix pull's batch: 50)")
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()

    rng = random.Random(1)
    counter = itertools.count(10**12)
    with tempfile.TemporaryDirectory(prefix="bench-markers-") as tmp:
        base = Path(tmp) / "base.db"
        _build(base, args.traces, rng)
        stores: dict[str, SqliteStore] = {}
        for kind in KINDS:
            path = Path(tmp) / f"{len(stores)}.db"
            shutil.copy(base, path)
            stores[kind] = SqliteStore(str(path))
        cpu: dict[str, list[float]] = {k: [] for k in KINDS}
        wal: dict[str, list[int]] = {k: [] for k in KINDS}
        for r in range(args.rounds):
            for kind in KINDS[r % 3 :] + KINDS[: r % 3]:
                store = stores[kind]
                ids = [f"{rng.getrandbits(128):032x}" for _ in range(args.batch)]
                if kind == "none":
                    meta = None
                elif kind == "by trace id":
                    meta = {f"phoenix.trace:{t}": MARKER for t in ids}
                else:
                    meta = {f"phoenix.trace:{next(counter)}:{t}": MARKER for t in ids}
                wal_path = Path(f"{store.path}-wal")
                before = wal_path.stat().st_size if wal_path.exists() else 0
                start = time.process_time()
                store.put_spans([s for t in ids for s in _spans(t)], meta=meta)
                cpu[kind].append(time.process_time() - start)
                grown = (wal_path.stat().st_size if wal_path.exists() else 0) - before
                if grown > 0:  # not across a checkpoint's restart of the WAL
                    wal[kind].append(grown)
        for store in stores.values():
            store.close()

    print(
        f"a store of {args.traces:,} traces (4 spans each) and their markers; put_spans of {args.batch} new"
        f" traces, {args.rounds} interleaved rounds; load {os.getloadavg()[0]:.1f}"
    )
    none = statistics.median(cpu["none"])
    for kind in KINDS:
        each = statistics.median(cpu[kind])
        per = "" if kind == "none" else f", {(each - none) / args.batch * 1e6:5.1f} us per marker"
        written = f"{statistics.median(wal[kind]) / 1024:6.0f} KiB" if wal[kind] else "      ?"
        print(f"  markers {kind:17s} CPU {each * 1e3:5.2f} ms per put{per:24s} WAL {written} per put")


if __name__ == "__main__":
    main()
