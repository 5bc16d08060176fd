"""The trace Langfuse's API returns for events its legacy ingestion endpoint received (the v2 SDK's batches,
tests/fixtures/traces/record_langfuse_v2.py), folded as its ingestion service merges them: per trace and per
observation id, events in time order, each later event's fields replacing the earlier's, but for the fields
fixed by the first (a trace's ``timestamp``, an observation's ``startTime``); ``input`` and ``output`` the
last event's that sets them (langfuse's worker/src/services/IngestionService)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["FIXTURES", "fold"]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "langfuse_v2"

_FIXED = {"trace": ("id", "timestamp"), "observation": ("id", "startTime", "traceId", "type")}
_TYPES = {"span": "SPAN", "generation": "GENERATION", "event": "EVENT"}


def fold(name: str) -> dict[str, Any]:
    """The trace of ``tests/fixtures/langfuse_v2/{name}.json`` as ``GET /traces/{id}`` returns it."""
    batches = json.loads((FIXTURES / f"{name}.json").read_text())
    events = sorted((e for b in batches for e in b["batch"]), key=lambda e: e["timestamp"])
    trace: dict[str, Any] = {}
    observations: dict[str, dict[str, Any]] = {}
    for event in events:
        kind, _, _ = event["type"].partition("-")
        body = {k: v for k, v in event["body"].items() if v is not None}
        if kind == "trace":
            _merge(trace, body, _FIXED["trace"])
        elif kind in _TYPES:
            record = observations.setdefault(body["id"], {"type": _TYPES[kind], "parentObservationId": None})
            _merge(record, body, _FIXED["observation"])
    found = sorted(observations.values(), key=lambda o: o["startTime"])
    # Observations of a trace no event created (the v2 decorator under ``langfuse_parent_trace_id``): Langfuse
    # makes the trace of their trace id, with no fields of its own.
    trace.setdefault("id", found[0]["traceId"])
    trace.setdefault("timestamp", found[0]["startTime"])
    return {**trace, "observations": found}


def _merge(record: dict[str, Any], body: dict[str, Any], fixed: tuple[str, ...]) -> None:
    for key, value in body.items():
        if key in fixed and key in record:
            continue
        record[key] = value
