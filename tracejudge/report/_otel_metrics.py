"""OpenTelemetry metrics pushed over OTLP while a long run (``score``, ``collect``) works.

Active only when ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; the
exporter reads the rest of the standard ``OTEL_EXPORTER_OTLP_*`` settings (headers, compression,
timeout) itself. The SDK is imported here only, lazily.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from tracejudge import __version__
from tracejudge.schema import ItemResult

_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
# Often enough that a dashboard follows a run of minutes; the rest goes out when the run ends.
# OTEL_METRIC_EXPORT_INTERVAL overrides it.
_EXPORT_INTERVAL_MS = 10_000


def _export_interval_ms(env: Mapping[str, str]) -> int:
    """``OTEL_METRIC_EXPORT_INTERVAL`` (milliseconds, the SDK's own setting) when it is a positive
    integer, else every 10 s."""
    try:
        value = int(env.get("OTEL_METRIC_EXPORT_INTERVAL", ""))
    except ValueError:
        return _EXPORT_INTERVAL_MS
    return value if value > 0 else _EXPORT_INTERVAL_MS


class RunMetrics:
    """Instruments of one run. Record, then :meth:`close` to push what is left."""

    def __init__(self, provider: Any) -> None:
        self._provider = provider
        meter = provider.get_meter("tracejudge", __version__)
        self._items = meter.create_counter(
            "tracejudge.score.items", unit="{item}", description="Scored items by verdict"
        )
        self._criteria = meter.create_counter(
            "tracejudge.score.criteria", unit="{criterion}", description="Criterion verdicts"
        )
        self._latency = meter.create_histogram(
            "tracejudge.judge.latency", unit="ms", description="Judge latency per scored item"
        )
        self._tokens = meter.create_counter(
            "tracejudge.judge.tokens", unit="{token}", description="Judge tokens by direction"
        )
        self._cost = meter.create_counter("tracejudge.judge.cost", unit="USD", description="Judge cost")
        self._spans = meter.create_counter(
            "tracejudge.collect.spans", unit="{span}", description="Spans stored by a collector"
        )
        self._traces = meter.create_counter(
            "tracejudge.collect.traces",
            unit="{trace}",
            description="Traces a pulling collector listed, by outcome (fetched, skipped: already stored)",
        )
        self._received = meter.create_counter(
            "tracejudge.collect.spans.received",
            unit="{span}",
            description="Spans in requests the OTLP receiver decoded (accepted + rejected)",
        )
        self._accepted = meter.create_counter(
            "tracejudge.collect.spans.accepted",
            unit="{span}",
            description="Spans the OTLP receiver validated and committed (new or already stored)",
        )
        self._rejected = meter.create_counter(
            "tracejudge.collect.spans.rejected",
            unit="{span}",
            description="Spans the OTLP receiver rejected as invalid (partial success)",
        )
        self._requests = meter.create_counter(
            "tracejudge.collect.requests",
            unit="{request}",
            description="Export requests the OTLP receiver answered, by signal and HTTP status",
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RunMetrics | None:
        """Metrics for this run when an OTLP endpoint is configured, else None (nothing is sent)."""
        env = os.environ if env is None else env
        if not any(env.get(v) for v in _ENDPOINT_VARS):
            return None
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource

        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(), export_interval_millis=_export_interval_ms(env)
        )
        resource = Resource.create({"service.name": "tracejudge", "service.version": __version__})
        return cls(MeterProvider(metric_readers=[reader], resource=resource))

    def item_scored(self, item: ItemResult, *, rubric: str) -> None:
        """Count one scored item, its criteria, and the judge's latency, tokens and cost."""
        self._items.add(1, {"rubric": rubric, "verdict": item.verdict, "category": item.category})
        for name, result in item.criteria.items():
            self._criteria.add(1, {"rubric": rubric, "criterion": name, "verdict": result.verdict})
        if item.replies:
            self._latency.record(item.latency_ms, {"rubric": rubric})
        self._tokens.add(item.input_tokens, {"rubric": rubric, "direction": "input"})
        self._tokens.add(item.output_tokens, {"rubric": rubric, "direction": "output"})
        self._cost.add(item.cost_usd, {"rubric": rubric})

    def spans_collected(self, count: int, *, source: str) -> None:
        """Count spans a collector stored."""
        self._spans.add(count, {"source": source})

    def traces_listed(self, *, fetched: bool, source: str) -> None:
        """Count one trace a pulling collector listed: fetched now, or skipped as already stored."""
        self._traces.add(1, {"source": source, "outcome": "fetched" if fetched else "skipped"})

    def spans_accepted(self, count: int, *, source: str) -> None:
        """Count spans a receiver validated and committed (new or already stored); also received."""
        self._received.add(count, {"source": source})
        self._accepted.add(count, {"source": source})

    def spans_rejected(self, count: int, *, source: str) -> None:
        """Count spans a receiver rejected as invalid; also received."""
        self._received.add(count, {"source": source})
        self._rejected.add(count, {"source": source})

    def request_answered(self, *, signal: str, status: int, source: str) -> None:
        """Count one export request by signal (``traces``, ``logs``) and the HTTP status answered."""
        self._requests.add(1, {"source": source, "signal": signal, "status": str(status)})

    def close(self) -> None:
        """Push what is left and stop the exporter."""
        self._provider.shutdown()
