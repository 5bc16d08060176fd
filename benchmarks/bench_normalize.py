"""Normalizer speed: a 200-span RAG trace at 1 MB and 10 MB of content.

Prints absolute times and two ratios measured in the same run:
- linearity: time(10 MB) / time(1 MB) (10 means linear in content size);
- overhead: normalize time / the floor of decoding every JSON attribute once.

Run: .venv/bin/python benchmarks/bench_normalize.py
"""

from __future__ import annotations

import json
import time
from typing import Any

from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan

TRACE = "ab" * 16


def build(content_bytes: int, spans: int = 200) -> list[RawSpan]:
    retrievers = spans // 4
    per_doc = content_bytes // (retrievers * 5 * 2)  # half in documents, half in model inputs
    filler = ("Prepayment shall not exceed 30,000 RMB per order. " * (per_doc // 50 + 1))[:per_doc]
    out = [
        RawSpan(
            trace_id=TRACE,
            span_id=f"{1:016x}",
            name="root",
            attributes={"openinference.span.kind": "CHAIN", "input.value": "q", "output.value": "a"},
        )
    ]
    for i in range(2, spans + 1):
        attrs: dict[str, Any]
        if i % 4 == 0:
            attrs = {"openinference.span.kind": "RETRIEVER", "input.value": "q"}
            for d in range(5):
                p = f"retrieval.documents.{d}.document."
                attrs[p + "id"] = f"n{i}-{d}"
                attrs[p + "content"] = filler
                attrs[p + "metadata"] = json.dumps({"doc_id": f"D{d}", "version": "v1"})
        elif i % 4 == 1:
            messages = [{"role": "system", "content": filler * 5}, {"role": "user", "content": "q"}]
            attrs = {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps(messages),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "a"}]}]
                ),
            }
        else:
            attrs = {"openinference.span.kind": "CHAIN", "input.value": "x", "output.value": "y"}
        out.append(
            RawSpan(
                trace_id=TRACE,
                span_id=f"{i:016x}",
                parent_span_id=f"{1:016x}",
                start_time_unix_nano=i,
                attributes=attrs,
            )
        )
    return out


def floor(spans: list[RawSpan]) -> None:
    for span in spans:
        for value in span.attributes.values():
            if isinstance(value, str) and value[:1] in "[{":
                json.loads(value)


def best(fn: Any, arg: Any, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    small, large = build(1_000_000), build(10_000_000)
    t_small, t_large = best(normalize, small), best(normalize, large)
    f_large = best(floor, large)
    print(f"normalize 200 spans,  1 MB: {t_small * 1e3:8.2f} ms")
    print(f"normalize 200 spans, 10 MB: {t_large * 1e3:8.2f} ms")
    print(f"decode-every-JSON-once floor, 10 MB: {f_large * 1e3:8.2f} ms")
    print(f"linearity (10 MB / 1 MB, 10.0 = linear): {t_large / t_small:.2f}")
    print(f"overhead vs floor at 10 MB: {t_large / f_large:.2f}x")


if __name__ == "__main__":
    main()
