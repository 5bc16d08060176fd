"""Writers: verdicts back where teams look — Langfuse scores and datasets, Phoenix annotations, OTel
evaluation events — each behind :class:`ScoreWriter`, :class:`DatasetWriter` or :class:`EvaluationWriter`,
all found in the one registry :data:`TARGETS`.

``write_triage(target, results)`` is what ``tracejudge triage --write-back TARGET`` calls.
"""

from __future__ import annotations

import typing as _typing

from tracejudge._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from tracejudge.write._langfuse import LangfuseWriter, score_body
    from tracejudge.write._langfuse_api import LangfuseApi, LangfuseApiError, LangfuseCredentials
    from tracejudge.write._otel import (
        EVENT_NAME,
        EvaluationEvent,
        EvaluationWriter,
        OtelEvaluationWriter,
        RecordingEvaluationWriter,
    )
    from tracejudge.write._phoenix import (
        PhoenixApi,
        PhoenixApiError,
        PhoenixCredentials,
        PhoenixWriter,
        annotation_for,
        annotation_identifier,
        annotator_kind,
    )
    from tracejudge.write._protocol import ClosingWriter, DatasetWriter, RecordingWriter, ScoreWriter
    from tracejudge.write._records import (
        DatasetItemRecord,
        ScoreDataType,
        ScoreRecord,
        WriteFailure,
        WriteReport,
        clip_comment,
        stable_id,
    )
    from tracejudge.write._targets import (
        TARGETS,
        Target,
        WriteKind,
        find_target,
        open_dataset_writer,
        open_event_writer,
        open_score_writer,
        target_names,
        targets_help,
    )
    from tracejudge.write._triage import (
        TRIAGE_SCORE_NAME,
        TRIAGE_VERSION,
        triage_comment,
        triage_scores,
        write_triage,
    )

__all__ = [
    "EVENT_NAME",
    "TARGETS",
    "TRIAGE_SCORE_NAME",
    "TRIAGE_VERSION",
    "ClosingWriter",
    "DatasetItemRecord",
    "DatasetWriter",
    "EvaluationEvent",
    "EvaluationWriter",
    "LangfuseApi",
    "LangfuseApiError",
    "LangfuseCredentials",
    "LangfuseWriter",
    "OtelEvaluationWriter",
    "PhoenixApi",
    "PhoenixApiError",
    "PhoenixCredentials",
    "PhoenixWriter",
    "RecordingEvaluationWriter",
    "RecordingWriter",
    "ScoreDataType",
    "ScoreRecord",
    "ScoreWriter",
    "Target",
    "WriteFailure",
    "WriteKind",
    "WriteReport",
    "annotation_for",
    "annotation_identifier",
    "annotator_kind",
    "clip_comment",
    "find_target",
    "open_dataset_writer",
    "open_event_writer",
    "open_score_writer",
    "score_body",
    "stable_id",
    "target_names",
    "targets_help",
    "triage_comment",
    "triage_scores",
    "write_triage",
]

__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "tracejudge.write._langfuse": (
            "LangfuseWriter",
            "score_body",
        ),
        "tracejudge.write._langfuse_api": (
            "LangfuseApi",
            "LangfuseApiError",
            "LangfuseCredentials",
        ),
        "tracejudge.write._otel": (
            "EVENT_NAME",
            "EvaluationEvent",
            "EvaluationWriter",
            "OtelEvaluationWriter",
            "RecordingEvaluationWriter",
        ),
        "tracejudge.write._phoenix": (
            "PhoenixApi",
            "PhoenixApiError",
            "PhoenixCredentials",
            "PhoenixWriter",
            "annotation_for",
            "annotation_identifier",
            "annotator_kind",
        ),
        "tracejudge.write._protocol": (
            "ClosingWriter",
            "DatasetWriter",
            "RecordingWriter",
            "ScoreWriter",
        ),
        "tracejudge.write._records": (
            "DatasetItemRecord",
            "ScoreDataType",
            "ScoreRecord",
            "WriteFailure",
            "WriteReport",
            "clip_comment",
            "stable_id",
        ),
        "tracejudge.write._targets": (
            "TARGETS",
            "Target",
            "WriteKind",
            "find_target",
            "open_dataset_writer",
            "open_event_writer",
            "open_score_writer",
            "target_names",
            "targets_help",
        ),
        "tracejudge.write._triage": (
            "TRIAGE_SCORE_NAME",
            "TRIAGE_VERSION",
            "triage_comment",
            "triage_scores",
            "write_triage",
        ),
    },
)
