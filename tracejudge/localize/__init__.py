"""TaskRecord + ticket (+ index manifest) -> Localization: the four checks of DESIGN 5.5.

``localize`` is pure: it runs :data:`PIPELINE`, one :class:`Stage` per check, each
``check(ctx, material) -> StageResult`` in its own module (``_indexed``, ``_retrieved``,
``_in_context``, ``_used_by_model``) over a :class:`CheckContext`. ``load_ticket`` and
``load_manifest`` read the user's files and raise :class:`~tracejudge.InputError` naming the file,
line and problem.
"""

from tracejudge.localize._context import CheckContext
from tracejudge.localize._facts import FactValue, cites_version, extract_values, fact_value
from tracejudge.localize._filter import evaluate_filter, filter_keys
from tracejudge.localize._identify import identify
from tracejudge.localize._judge import UsageJudge
from tracejudge.localize._llm_judge import LLMUsageJudge, find_quote, usage_messages
from tracejudge.localize._load import load_manifest, load_ticket, parse_ticket, ticket_files
from tracejudge.localize._localize import (
    PIPELINE,
    STAGES,
    STILL_ARRIVING,
    Stage,
    answer_still_arriving,
    localize,
    still_arriving,
    task_time,
    trace_not_stored,
    trace_unreadable,
)
from tracejudge.localize._session import SessionContext, localize_session, prior_user_turns
from tracejudge.localize._summary import verdict_counts
from tracejudge.localize._text import AmbiguousDate, ClauseMatch, find_clause, tokenize
from tracejudge.localize._triage import NOT_STORED_HINT, TicketResult, TriageOutcome, triage_tickets

__all__ = [
    "NOT_STORED_HINT",
    "PIPELINE",
    "STAGES",
    "STILL_ARRIVING",
    "AmbiguousDate",
    "CheckContext",
    "ClauseMatch",
    "FactValue",
    "LLMUsageJudge",
    "SessionContext",
    "Stage",
    "TicketResult",
    "TriageOutcome",
    "UsageJudge",
    "answer_still_arriving",
    "cites_version",
    "evaluate_filter",
    "extract_values",
    "fact_value",
    "filter_keys",
    "find_clause",
    "find_quote",
    "identify",
    "load_manifest",
    "load_ticket",
    "localize",
    "localize_session",
    "parse_ticket",
    "prior_user_turns",
    "still_arriving",
    "task_time",
    "ticket_files",
    "tokenize",
    "trace_not_stored",
    "trace_unreadable",
    "triage_tickets",
    "usage_messages",
    "verdict_counts",
]
