"""Writers: verdicts back where teams look (Langfuse scores and datasets), each behind :class:`Writer`.

``write_triage(target, results)`` is what ``tracejudge triage --write-back TARGET`` calls.
"""

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
from tracejudge.write._protocol import RecordingWriter, Writer
from tracejudge.write._records import (
    DatasetItemRecord,
    ScoreDataType,
    ScoreRecord,
    WriteFailure,
    WriteReport,
    stable_id,
)
from tracejudge.write._triage import (
    TRIAGE_SCORE_NAME,
    TRIAGE_VERSION,
    WRITE_BACK_TARGETS,
    triage_comment,
    triage_scores,
    write_triage,
)

__all__ = [
    "EVENT_NAME",
    "TRIAGE_SCORE_NAME",
    "TRIAGE_VERSION",
    "WRITE_BACK_TARGETS",
    "DatasetItemRecord",
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
    "WriteFailure",
    "WriteReport",
    "Writer",
    "annotation_for",
    "annotation_identifier",
    "annotator_kind",
    "score_body",
    "stable_id",
    "triage_comment",
    "triage_scores",
    "write_triage",
]
