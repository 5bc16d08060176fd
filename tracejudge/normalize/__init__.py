"""Raw spans -> TaskRecord, reading every convention of DESIGN 5.4."""

from tracejudge.normalize._answer import (
    RECORD_ANSWER,
    continued,
    earlier_answers,
    out_of_order,
    tool_requests,
)
from tracejudge.normalize._cut import cut_short
from tracejudge.normalize._normalize import DECORATOR_RUNS, OWN_TRACE_ID, incompleteness, normalize

__all__ = [
    "DECORATOR_RUNS",
    "OWN_TRACE_ID",
    "RECORD_ANSWER",
    "continued",
    "cut_short",
    "earlier_answers",
    "incompleteness",
    "normalize",
    "out_of_order",
    "tool_requests",
]
