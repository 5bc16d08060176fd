"""Where raw spans and run state live: SQLite by default, behind the :class:`Store` protocol."""

from __future__ import annotations

from tracejudge.store._encoded import EncodedSpan, OtlpEnvelope, otlp_session_id
from tracejudge.store._inspect import StoreState, inspect_store
from tracejudge.store._open import DEFAULT_STORE, open_store, resolve_store_url, sqlite_file
from tracejudge.store._protocol import LogEvent, MetaSwap, RunProgress, Store, TraceSummary, TriageEntry
from tracejudge.store._read import UnreadableRecordError, read_json_record, read_record
from tracejudge.store._resolve import resolve_trace_id
from tracejudge.store._sql import _SCHEMA_VERSION, SqlStore
from tracejudge.store._sqlite import SqliteStore
from tracejudge.store._verify import StoreVerification, UnreadableTrace, verify_store

STORE_SCHEMA_VERSION = _SCHEMA_VERSION
"""The store schema this tracejudge writes (a newer store is refused; shown by ``--version``)."""

__all__ = [
    "DEFAULT_STORE",
    "STORE_SCHEMA_VERSION",
    "EncodedSpan",
    "LogEvent",
    "MetaSwap",
    "OtlpEnvelope",
    "RunProgress",
    "SqlStore",
    "SqliteStore",
    "Store",
    "StoreState",
    "StoreVerification",
    "TraceSummary",
    "TriageEntry",
    "UnreadableRecordError",
    "UnreadableTrace",
    "inspect_store",
    "open_store",
    "otlp_session_id",
    "read_json_record",
    "read_record",
    "resolve_store_url",
    "resolve_trace_id",
    "sqlite_file",
    "verify_store",
]
