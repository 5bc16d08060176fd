"""Conversations (DESIGN 5.5 **Sessions**): the checks read a session's earlier turns too.

Pure: the ticket's turn and the stored turns before it in, a :class:`Localization` out. Material an
earlier turn retrieved counts as retrieved (evidence names that turn's trace and span); whether it
is in context is still decided by this turn's model input, where the conversation history carries
it; the answer judged is this turn's. When the history shows more earlier turns than are stored, a
turn that is not stored may have been the one that retrieved the material: "not returned" is then
never concluded, and ``missing`` names the turns to collect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tracejudge.localize._judge import UsageJudge
from tracejudge.localize._localize import localize
from tracejudge.schema import (
    Evidence,
    Localization,
    ManifestEntry,
    MaterialResult,
    SessionTurn,
    StageResult,
    TaskRecord,
    Ticket,
)

__all__ = ["SessionContext", "localize_session", "prior_user_turns"]


@dataclass(frozen=True)
class SessionContext:
    """The conversation a ticket's trace is one turn of, as far as the store holds it."""

    session_id: str
    """The session (conversation) id."""
    earlier: tuple[TaskRecord, ...]
    """The stored turns before the ticket's trace, oldest first."""

    @property
    def collect_hint(self) -> str:
        """How to bring in turns that are not stored (named in ``missing``)."""
        return (
            f"collect the session's other traces (tracejudge collect langfuse --session {self.session_id},"
            " collect phoenix --session, or send them to the receiver)"
        )


def prior_user_turns(task: TaskRecord) -> int | None:
    """How many user turns precede this one in its model input (the conversation history), or None
    when no model input was recorded."""
    counts = [
        sum(1 for m in call.input_messages if m.role == "user")
        for call in task.model_calls
        if call.input_recorded and call.input_messages
    ]
    if not counts:
        return None
    # The first call of the turn carries the history as the user saw it; later calls add tool turns.
    return max(0, counts[0] - 1)


def _missing_turns(task: TaskRecord, ctx: SessionContext) -> str | None:
    """What of the session is not stored, when the history says turns are missing; else None."""
    expected = prior_user_turns(task)
    stored = len(ctx.earlier)
    # No model input recorded: the history cannot say how many turns came before (nor whether one
    # carried the material); the stages that need the model input are unconfirmed on their own.
    if expected is None or expected <= stored:
        return None
    return (
        f"{expected - stored} earlier turn(s) of session {ctx.session_id}: this turn's model input"
        f" carries {expected} earlier user turn(s) but {stored} are stored; {ctx.collect_hint}"
    )


def _merged(task: TaskRecord, earlier: Sequence[TaskRecord]) -> TaskRecord:
    retrievals = [r for turn in earlier for r in turn.retrievals]
    rerankings = [r for turn in earlier for r in turn.rerankings]
    gaps = task.gaps
    if retrievals:
        # An earlier turn retrieved: this turn having no retrieval of its own is not a gap.
        gaps = tuple(g for g in gaps if g.kind != "no_retrieval_span")
    return task.model_copy(
        update={
            "retrievals": (*retrievals, *task.retrievals),
            "rerankings": (*rerankings, *task.rerankings),
            "gaps": gaps,
            # A trace holding several runs is checked run by run (localize): each reads the earlier turns.
            "runs": tuple(_merged(run, earlier) for run in task.runs),
        }
    )


def _turn_notes(loc: Localization, earlier: Sequence[TaskRecord]) -> Localization:
    """Name the turn (and its trace) of every evidence that comes from an earlier turn."""
    owner: dict[str, tuple[int, str]] = {}
    for n, turn in enumerate(earlier, start=1):
        for call in turn.retrievals:
            for span_id in (call.span_id, *call.span_ids):
                owner.setdefault(span_id, (n, turn.trace_id))
        for rr in turn.rerankings:
            owner.setdefault(rr.span_id, (n, turn.trace_id))

    def ev(e: Evidence) -> Evidence:
        if e.span_id is None or e.span_id not in owner:
            return e
        n, trace_id = owner[e.span_id]
        return e.model_copy(update={"note": f"turn {n} of the session (trace {trace_id}): {e.note}"})

    def stage(s: StageResult) -> StageResult:
        return s.model_copy(update={"evidence": tuple(ev(e) for e in s.evidence)})

    def material(m: MaterialResult) -> MaterialResult:
        return m.model_copy(update={"stages": tuple(stage(s) for s in m.stages)})

    return loc.model_copy(
        update={
            "stages": tuple(stage(s) for s in loc.stages),
            "materials": tuple(material(m) for m in loc.materials),
        }
    )


def localize_session(
    task: TaskRecord,
    session: SessionContext,
    ticket: Ticket,
    manifest: Sequence[ManifestEntry] | None = None,
    *,
    judge: UsageJudge | None = None,
    now: datetime | None = None,
) -> Localization:
    """:func:`~tracejudge.localize.localize` over ``task`` with its session's earlier turns read too."""
    missing = _missing_turns(task, session)
    merged = _merged(task, session.earlier)
    loc = localize(merged, ticket, manifest, judge=judge, session_missing=missing, now=now)
    loc = _turn_notes(loc, session.earlier)
    turns = tuple(SessionTurn(trace_id=t.trace_id, start_time=t.start_time) for t in (*session.earlier, task))
    return loc.model_copy(update={"session_id": session.session_id, "turns": turns})
