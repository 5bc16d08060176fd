"""Counts over many triage results (the folder mode of ``tracejudge triage``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import get_args

from tracejudge.schema import Localization, Verdict

__all__ = ["verdict_counts"]


def verdict_counts(results: Iterable[Localization]) -> dict[str, int]:
    """How many results have each verdict; every verdict is listed, zero or not."""
    counts = dict.fromkeys(get_args(Verdict), 0)
    for r in results:
        counts[r.verdict] += 1
    return counts
