"""``triage --sweep --write-back TARGET``: each flagged trace marked where the team looks (a Langfuse
score or a Phoenix annotation), through the same write-back targets as triage verdicts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracejudge.schema import SweepFlag

__all__ = ["SWEEP_SCORE_NAME", "sweep_scores", "write_sweep"]

SWEEP_SCORE_NAME = "tracejudge.sweep"
# Part of the score id: bump when the score's meaning changes, so old marks stay apart.
SWEEP_VERSION = "1"


def _comment(flag: SweepFlag) -> str:
    now = flag.in_effect or "several versions"
    lines = [f"rests on {flag.doc_id}@{flag.used}, not in effect at the task time (in effect: {now})"]
    lines += [f"- {'[span ' + e.span_id + '] ' if e.span_id else ''}{e.note}" for e in flag.evidence]
    from tracejudge.write import clip_comment

    return clip_comment("\n".join(lines))


def sweep_scores(flags: Sequence[SweepFlag]) -> list[Any]:
    """One CATEGORICAL score per (flagged trace, document), valued ``not_in_effect``, evidence as comment."""
    from tracejudge.write import ScoreRecord

    return [
        ScoreRecord(
            trace_id=f.trace_id,
            name=SWEEP_SCORE_NAME,
            value="not_in_effect",
            data_type="CATEGORICAL",
            comment=_comment(f),
            timestamp=f.task_time,
            rubric_name="sweep",
            # The score id hashes trace, name and version: the document keeps two flags of one trace apart.
            rubric_version=f"{SWEEP_VERSION}:{f.doc_id}",
            metadata={"doc_id": f.doc_id, "in_effect": f.in_effect, "used": f.used},
        )
        for f in flags
    ]


def write_sweep(target: str, flags: Sequence[SweepFlag], *, writer: Any = None) -> Any:
    """Mark the flagged traces in ``target`` (a ``write.TARGETS`` entry that takes scores: Langfuse or
    Phoenix); a rerun replaces (stable ids). ``writer`` overrides the target's own writer (tests pass a
    ``RecordingWriter``); it is not closed here."""
    from tracejudge.write import find_target, open_score_writer

    find_target(target, "scores")
    scores = sweep_scores(flags)
    if writer is not None:
        return writer.write_scores(scores)
    with open_score_writer(target) as own:
        return own.write_scores(scores)
