"""Triage speed on a 200-span trace with 1 MB and 10 MB of model input, as a ratio (DESIGN 6).

    .venv/bin/python benchmarks/bench_triage.py

Linear in context size means the 10 MB time is about 10x the 1 MB time (ratio 10.0). Three
cases: the clause found (near the end of the last model call), the clause absent (dropped in
context: the best partial match is searched), and normalize + localize from raw OpenInference
spans (when the real normalizer is installed).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime

from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.schema import (
    Document,
    ManifestEntry,
    Material,
    Message,
    ModelCall,
    RawSpan,
    RetrievalCall,
    TaskRecord,
    Ticket,
    ToolCall,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
T0 = datetime(2026, 11, 18, 9, 30, tzinfo=UTC)
CLAUSE = "Prepayment shall not exceed 30,000 RMB"
SPANS, RETRIEVALS, MODELS = 200, 40, 40
WORDS = [
    "the",
    "supplier",
    "shall",
    "deliver",
    "goods",
    "invoices",
    "are",
    "payable",
    "within",
    "days",
    "of",
    "receipt",
    "buyer",
    "may",
    "audit",
    "records",
    "quarterly",
    "penalties",
    "apply",
    "to",
    "late",
    "delivery",
    "warranty",
    "covers",
    "defects",
    "for",
    "months",
    "order",
    "confirmation",
    "is",
    "binding",
    "unless",
    "cancelled",
    "in",
    "writing",
    "freight",
    "insurance",
    "customs",
    "duties",
]


def filler(n_chars: int, rng: random.Random) -> str:
    out: list[str] = []
    size = 0
    while size < n_chars:
        line = " ".join(rng.choice(WORDS) for _ in range(14)) + f" {rng.randint(1, 99999):,} RMB.\n"
        out.append(line)
        size += len(line)
    return "".join(out)[:n_chars]


def contexts(total: int, with_clause: bool) -> list[str]:
    rng = random.Random(7)
    per = total // MODELS
    texts = [filler(per, rng) for _ in range(MODELS)]
    if with_clause:
        last = texts[-1]
        cut = len(last) - 2000
        texts[-1] = last[:cut] + f"\nAttachment v2: {CLAUSE} per order.\n" + last[cut:]
    else:
        texts[-1] = texts[-1] + "\nAttachment v2: Prepayment shall not"  # cut off mid-clause
    return texts


def task_record(total: int, with_clause: bool) -> TaskRecord:
    texts = contexts(total, with_clause)
    retrievals = tuple(
        RetrievalCall(
            span_id=f"{i:016x}",
            documents=tuple(
                Document(
                    doc_id="C-17/attachment" if (i, k) == (RETRIEVALS - 1, 0) else f"doc-{i}-{k}",
                    version="v2",
                    content=f"{CLAUSE} per order." if (i, k) == (RETRIEVALS - 1, 0) else "x" * 200,
                    position=k,
                )
                for k in range(5)
            ),
            filter={"region": "CN"},
            principal="procurement",
        )
        for i in range(RETRIEVALS)
    )
    models = tuple(
        ModelCall(
            span_id=f"{1000 + i:016x}",
            input_messages=(Message(role="user", content=t),),
            input_recorded=True,
            output_recorded=True,
            input_text=t,
            output_text="The cap is 30,000 RMB.",
        )
        for i, t in enumerate(texts)
    )
    tools = tuple(
        ToolCall(span_id=f"{2000 + i:016x}", name="lookup") for i in range(SPANS - RETRIEVALS - MODELS)
    )
    return TaskRecord(
        trace_id=TRACE,
        start_time=T0,
        input="Can I prepay 40,000 RMB?",
        final_answer="No: the cap is 30,000 RMB.",
        final_answer_span_id=models[-1].span_id,
        retrievals=retrievals,
        model_calls=models,
        tool_calls=tools,
    )


def raw_spans(total: int, with_clause: bool) -> list[RawSpan]:
    texts = contexts(total, with_clause)
    base = 1_763_458_200_000_000_000
    root = "f" * 16
    spans = [
        RawSpan(
            trace_id=TRACE,
            span_id=root,
            name="agent",
            start_time_unix_nano=base,
            end_time_unix_nano=base + 10**9,
            attributes={
                "openinference.span.kind": "AGENT",
                "input.value": "Can I prepay 40,000 RMB?",
                "output.value": "No: the cap is 30,000 RMB.",
            },
        )
    ]
    n = 1
    for i in range(RETRIEVALS):
        attrs: dict[str, object] = {"openinference.span.kind": "RETRIEVER", "input.value": "prepayment cap"}
        for k in range(5):
            hit = (i, k) == (RETRIEVALS - 1, 0)
            attrs[f"retrieval.documents.{k}.document.id"] = f"chunk-{i}-{k}"
            attrs[f"retrieval.documents.{k}.document.content"] = f"{CLAUSE} per order." if hit else "x" * 200
            attrs[f"retrieval.documents.{k}.document.metadata"] = json.dumps(
                {"doc_id": "C-17/attachment" if hit else f"doc-{i}-{k}", "version": "v2"}
            )
        spans.append(
            RawSpan(
                trace_id=TRACE,
                span_id=f"{n:016x}",
                parent_span_id=root,
                name="retrieve",
                start_time_unix_nano=base + n,
                end_time_unix_nano=base + n + 1,
                attributes=attrs,
            )
        )
        n += 1
        if i < MODELS:
            spans.append(
                RawSpan(
                    trace_id=TRACE,
                    span_id=f"{n:016x}",
                    parent_span_id=root,
                    name="llm",
                    start_time_unix_nano=base + n,
                    end_time_unix_nano=base + n + 1,
                    attributes={
                        "openinference.span.kind": "LLM",
                        "llm.input_messages.0.message.role": "user",
                        "llm.input_messages.0.message.content": texts[i],
                        "llm.output_messages.0.message.role": "assistant",
                        "llm.output_messages.0.message.content": "The cap is 30,000 RMB.",
                    },
                )
            )
            n += 1
    while len(spans) < SPANS:
        spans.append(
            RawSpan(
                trace_id=TRACE,
                span_id=f"{n:016x}",
                parent_span_id=root,
                name="lookup",
                start_time_unix_nano=base + n,
                end_time_unix_nano=base + n + 1,
                attributes={"openinference.span.kind": "TOOL", "tool.name": "lookup"},
            )
        )
        n += 1
    return spans


TICKET = Ticket(
    ticket="BENCH-1",
    required=(Material(doc_id="C-17/attachment", version="v2", clause=CLAUSE, facts={"cap_rmb": 30000}),),
    superseded=(Material(doc_id="C-17/attachment", version="v1", facts={"cap_rmb": 50000}),),
)
MANIFEST = [
    ManifestEntry(doc_id="C-17/attachment", version="v2", indexed_at=datetime(2026, 3, 2, tzinfo=UTC))
]


def timed(fn: Callable[[], object], repeat: int = 5) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    print(f"triage on a {SPANS}-span trace ({RETRIEVALS} retrievals, {MODELS} model calls); median of 5 runs")
    for found in (True, False):
        label = "clause found" if found else "clause absent (dropped in context)"
        ms: dict[int, float] = {}
        for mb in (1, 10):
            task = task_record(mb * 1_000_000, found)
            verdict = localize(task, TICKET, MANIFEST).verdict
            ms[mb] = timed(lambda task=task: localize(task, TICKET, MANIFEST)) * 1000
            print(f"  localize, {label:36} {mb:>2} MB: {ms[mb]:8.1f} ms   verdict {verdict}")
        print(f"  ratio 10 MB / 1 MB: {ms[10] / ms[1]:.1f}  (10.0 = linear)")
    probe = normalize(raw_spans(100_000, True))
    if not probe.model_calls:
        print("  normalize + localize: skipped (the normalizer in this installation reads no model calls)")
        return
    ms = {}
    for mb in (1, 10):
        spans = raw_spans(mb * 1_000_000, True)
        verdict = localize(normalize(spans), TICKET, MANIFEST).verdict
        ms[mb] = timed(lambda spans=spans: localize(normalize(spans), TICKET, MANIFEST), repeat=3) * 1000
        print(
            f"  normalize + localize from raw spans          {mb:>2} MB: {ms[mb]:8.1f} ms   verdict {verdict}"
        )
    print(f"  ratio 10 MB / 1 MB: {ms[10] / ms[1]:.1f}  (10.0 = linear)")


if __name__ == "__main__":
    main()
