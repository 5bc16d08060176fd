"""Pull traces from a Phoenix server's REST API (spans by project and time window) into the store."""

from tracejudge_collectors.phoenix._cli import phoenix_command
from tracejudge_collectors.phoenix._convert import fold_attributes, span_to_raw
from tracejudge_collectors.phoenix._pull import LAG, PullOptions, PullReport, pull_phoenix, pull_summary

__all__ = [
    "LAG",
    "PullOptions",
    "PullReport",
    "fold_attributes",
    "phoenix_command",
    "pull_phoenix",
    "pull_summary",
    "span_to_raw",
]
