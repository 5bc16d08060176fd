"""OpenTelemetry write-back: ``gen_ai.evaluation.result`` log events parented to the evaluated span
(DESIGN 5.7), sent with the OTLP exporter. The one module that imports the OTel logs SDK."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field

from tracejudge.write._protocol import ClosingWriter
from tracejudge.write._records import WriteFailure, WriteReport

EVENT_NAME = "gen_ai.evaluation.result"


class EvaluationEvent(BaseModel):
    """One evaluation result to attach to a span."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    trace_id: str
    """Trace of the evaluated span, 32 hex characters."""
    span_id: str
    """The evaluated span, 16 hex characters."""
    name: str
    """``gen_ai.evaluation.name``: the criterion, check or overall verdict."""
    score_value: float | None = None
    """``gen_ai.evaluation.score.value``."""
    score_label: str | None = None
    """``gen_ai.evaluation.score.label``: pass, fail or indeterminate."""
    explanation: str | None = None
    """``gen_ai.evaluation.explanation``: the reasoning."""
    attributes: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Extra attributes (provenance, an idempotency identifier); no OTel equivalent exists."""

    def otel_attributes(self) -> dict[str, str | int | float | bool]:
        """The event's attributes as sent."""
        out: dict[str, str | int | float | bool] = {"gen_ai.evaluation.name": self.name}
        if self.score_value is not None:
            out["gen_ai.evaluation.score.value"] = float(self.score_value)
        if self.score_label is not None:
            out["gen_ai.evaluation.score.label"] = self.score_label
        if self.explanation:
            out["gen_ai.evaluation.explanation"] = self.explanation
        out.update(self.attributes)
        return out


class EvaluationWriter(ClosingWriter, Protocol):
    """Where evaluation events go."""

    def write_events(self, events: Sequence[EvaluationEvent]) -> WriteReport:
        """Emit the events; each carries the evaluated span's ids."""
        ...


class RecordingEvaluationWriter:
    """A fake that keeps the events it was given."""

    def __init__(self) -> None:
        self.events: list[EvaluationEvent] = []

    def write_events(self, events: Sequence[EvaluationEvent]) -> WriteReport:
        self.events.extend(events)
        return WriteReport(target="recording", written=len(events))

    def close(self) -> None:
        return None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class OtelEvaluationWriter:
    """Emits each event as an OTLP log record carrying the evaluated span's trace and span ids.

    ``exporter`` defaults to the OTLP/HTTP log exporter, configured by ``OTEL_EXPORTER_OTLP_*``
    (``endpoint`` overrides the logs endpoint). No live span is needed: the target span's context is
    rebuilt from its ids.
    """

    def __init__(
        self, exporter: Any = None, *, endpoint: str | None = None, service_name: str = "tracejudge"
    ):
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.sdk.resources import Resource

        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

            exporter = OTLPLogExporter(endpoint=endpoint)
        self._provider = LoggerProvider(resource=Resource.create({"service.name": service_name}))
        self._provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
        self._logger = self._provider.get_logger("tracejudge")

    def write_events(self, events: Sequence[EvaluationEvent]) -> WriteReport:
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

        failed: list[WriteFailure] = []
        written = 0
        for ev in events:
            try:
                ctx = set_span_in_context(
                    NonRecordingSpan(
                        SpanContext(
                            trace_id=int(ev.trace_id, 16),
                            span_id=int(ev.span_id, 16),
                            is_remote=True,
                            trace_flags=TraceFlags(TraceFlags.SAMPLED),
                        )
                    )
                )
            except ValueError:
                failed.append(
                    WriteFailure(key=f"{ev.trace_id}/{ev.span_id}/{ev.name}", reason="bad trace/span id")
                )
                continue
            self._logger.emit(event_name=EVENT_NAME, context=ctx, attributes=ev.otel_attributes())
            written += 1
        if not self._provider.force_flush():
            return WriteReport(
                target="otel",
                written=0,
                failed=(*failed, WriteFailure(key="*", reason="the OTLP exporter did not flush in time")),
            )
        return WriteReport(target="otel", written=written, failed=tuple(failed))

    def close(self) -> None:
        self._provider.shutdown()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
