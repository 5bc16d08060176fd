"""Pull traces from Langfuse's public API (v4 observations API or the legacy traces API) into the store."""

from tracejudge_collectors.langfuse._cli import langfuse_command, parse_when
from tracejudge_collectors.langfuse._convert import trace_to_spans
from tracejudge_collectors.langfuse._pull import (
    LAG,
    Detection,
    PullOptions,
    PullReport,
    ScoreRefresh,
    detect,
    pull_langfuse,
    pull_summary,
    refresh_scores,
    stored_scores,
)

__all__ = [
    "LAG",
    "Detection",
    "PullOptions",
    "PullReport",
    "ScoreRefresh",
    "detect",
    "langfuse_command",
    "parse_when",
    "pull_langfuse",
    "pull_summary",
    "refresh_scores",
    "stored_scores",
    "trace_to_spans",
]
