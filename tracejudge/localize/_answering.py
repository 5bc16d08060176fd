"""Which model calls could have written the answer: ``in_context`` counts the material as reaching the model
only in their inputs.

A trace often holds model calls whose input is not the answering call's: a title, a summary for memory or a
grader made after the answer, a rewrite or compression step before it. The clause in such a call's input is
no evidence it was in the input of the call that answered, and read as such ``in_context`` passes and
``used_by_model`` blames the model for material its context had dropped (DESIGN 5.5).

The calls that count for a call are the call and those it *continues* (``normalize._answer``: its input
re-sends theirs, adding only tool steps), whose inputs went on into its own. The answering call is the one the
answer was read from; where the answer is the root's, the one call whose reply is that text when every other
call's reply was recorded whole; else — no answer read, or no reply is it — the calls normalize found may have
given it (``TaskRecord.answering_calls``: the last, every call no later call continues, and those whose order
against the last the trace's skewed times leave open), or every call of a record that does not say. A call
that returned several choices may have given any of them: the root's answer names it when any choice is that
text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tracejudge.normalize import continued
from tracejudge.schema import ModelCall, TaskRecord

__all__ = ["Answering", "answering", "flat", "replies"]

_OUTPUT_NOT_WHOLE = frozenset(
    {"model_output_not_recorded", "model_output_redacted", "model_output_truncated"}
)


@dataclass(frozen=True)
class Answering:
    """The calls that may have written the answer, each with the calls whose input reached its own."""

    calls: tuple[ModelCall, ...]
    """The calls that may have written the answer (one when the trace says which), in start order."""
    chains: tuple[frozenset[str], ...]
    """For each of ``calls``, the span ids of it and the calls it continues."""

    @property
    def known(self) -> bool:
        """Whether the trace says which call wrote the answer."""
        return len(self.calls) == 1


def answering(task: TaskRecord) -> Answering:
    """The calls of ``task`` (which has model calls) that may have written its answer."""
    models = task.model_calls
    calls = _named(task, models) or _found(task, models)
    # Only start times are kept on the record: a retry (the same input sent again) then reads as not
    # continued, which changes nothing here — its input holds the clause exactly when the retry's does.
    times = {call.span_id: (_ns(call.start_time), 0) for call in models}
    chains = tuple(frozenset(c.span_id for c in continued(models, call, times)) for call in calls)
    return Answering(tuple(calls), chains)


def _found(task: TaskRecord, models: Sequence[ModelCall]) -> list[ModelCall]:
    """The calls normalize found may have given the answer, else (a record that does not say) every call."""
    ids = set(task.answering_calls)
    return [call for call in models if call.span_id in ids] or list(models)


def _named(task: TaskRecord, models: Sequence[ModelCall]) -> list[ModelCall]:
    """The call the answer was read from, else the one call whose reply is the root's answer when every
    other call's reply is known (one not recorded whole may be the answer too); empty when none is said."""
    found = [call for call in models if call.span_id == task.final_answer_span_id]
    if found or not task.final_answer:
        return found
    answer = flat(task.final_answer)
    same = [call for call in models if answer in replies(call)]
    # A reply not recorded, or recorded in part, may be the answer as well (a draft may read as it).
    unknown = {g.span_id for g in task.gaps if g.kind in _OUTPUT_NOT_WHOLE}
    others = [call for call in models if call not in same]
    if len(same) == 1 and all(call.output_recorded and call.span_id not in unknown for call in others):
        return same
    return []


def replies(call: ModelCall) -> set[str]:
    """The call's replies, flattened: its output text and every choice's."""
    return {flat(text) for text in (call.output_text, *(m.content for m in call.output_messages)) if text}


def flat(text: str) -> str:
    """The text with its whitespace runs made one space, casefolded."""
    return " ".join(text.split()).casefold()


def _ns(when: datetime | None) -> int:
    return 0 if when is None else int(when.timestamp() * 1_000_000) * 1000
