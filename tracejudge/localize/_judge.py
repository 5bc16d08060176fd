"""The seam for judge-assisted usage checks: deterministic code decides first, a judge only when it cannot."""

from __future__ import annotations

from typing import Protocol

from tracejudge.schema import StageResult, UsageQuestion

__all__ = ["UsageJudge"]


class UsageJudge(Protocol):
    """Decides the ``used_by_model`` stage when the answer's facts do not settle it.

    Implementations (the LLM judge) return a ``StageResult`` named ``used_by_model`` whose pass or
    fail cites evidence; a result without evidence, or a failure raised as a ``TracejudgeError``,
    is recorded as ``unconfirmed``, never as a pass.
    """

    def judge_usage(self, question: UsageQuestion) -> StageResult:
        """Did the answer rest on the required material (and not on the superseded one)?"""
        ...
