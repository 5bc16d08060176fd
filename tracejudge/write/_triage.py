"""Triage verdicts as scores: ``--write-back TARGET`` of ``tracejudge triage``."""

from __future__ import annotations

from collections.abc import Sequence

from tracejudge.schema import Localization
from tracejudge.write._protocol import ScoreWriter
from tracejudge.write._records import ScoreRecord, WriteReport, clip_comment
from tracejudge.write._targets import find_target, open_score_writer

TRIAGE_SCORE_NAME = "tracejudge.triage"
# Bump when the score's meaning changes: it is part of the score id, so old verdicts stay apart.
TRIAGE_VERSION = "1"


def triage_comment(result: Localization) -> str:
    """The verdict and each stage's evidence, as plain text for the trace's score comment."""
    lines = [f"verdict: {result.verdict}" + (f" (cause: {result.cause})" if result.cause else "")]
    if result.summary:
        lines.append(result.summary)
    for stage in result.stages:
        head = f"- {stage.name}: {stage.status}"
        if stage.cause:
            head += f" ({stage.cause})"
        if stage.detail:
            head += f" — {stage.detail}"
        lines.append(head)
        lines.extend(
            f"    evidence{f' [span {e.span_id}]' if e.span_id else ''}: {e.note}" for e in stage.evidence
        )
        if stage.missing:
            lines.append(f"    missing: {', '.join(stage.missing)}")
    return clip_comment("\n".join(lines))


def triage_scores(results: Sequence[Localization]) -> list[ScoreRecord]:
    """One CATEGORICAL score per triaged trace, named ``tracejudge.triage``, valued with the verdict."""
    return [
        ScoreRecord(
            trace_id=r.trace_id,
            name=TRIAGE_SCORE_NAME,
            value=r.verdict,
            data_type="CATEGORICAL",
            comment=triage_comment(r),
            timestamp=r.task_time,
            rubric_name="triage",
            rubric_version=TRIAGE_VERSION,
            metadata={
                "ticket": r.ticket,
                "cause": r.cause,
                "stages": [{"name": s.name, "status": s.status, "cause": s.cause} for s in r.stages],
                "schema_version": r.schema_version,
            },
        )
        for r in results
    ]


def write_triage(
    target: str, results: Sequence[Localization], *, writer: ScoreWriter | None = None
) -> WriteReport:
    """Write triage verdicts back to a target that takes scores (``write.TARGETS``: Langfuse or
    Phoenix): the verdict as a CATEGORICAL score named ``tracejudge.triage`` on each trace (in Phoenix
    a CODE trace annotation), the stage evidence as its comment. A rerun replaces.

    ``writer`` overrides the target's own writer (tests pass a :class:`RecordingWriter`); it is not
    closed here."""
    find_target(target, "scores")
    scores = triage_scores(results)
    if writer is not None:
        return writer.write_scores(scores)
    with open_score_writer(target) as own:
        return own.write_scores(scores)
