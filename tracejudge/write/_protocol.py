"""The writer protocol, and a recording fake beside it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tracejudge.write._records import DatasetItemRecord, ScoreRecord, WriteReport


class Writer(Protocol):
    """Where verdicts go: scores on traces, and dataset items."""

    def write_scores(self, scores: Sequence[ScoreRecord]) -> WriteReport:
        """Write (upsert) scores; a rerun with the same records replaces instead of adding."""
        ...

    def write_dataset_items(self, dataset: str, items: Sequence[DatasetItemRecord]) -> WriteReport:
        """Create the dataset if needed and upsert its items."""
        ...


class RecordingWriter:
    """A writer that keeps what it was given, keyed like the real backend (a rewrite replaces)."""

    def __init__(self) -> None:
        self.scores: dict[str, ScoreRecord] = {}
        """Scores by score id."""
        self.items: dict[str, tuple[str, DatasetItemRecord]] = {}
        """Dataset items by item id: (dataset, item)."""
        self.calls: list[str] = []
        """Method names called, in order."""

    def write_scores(self, scores: Sequence[ScoreRecord]) -> WriteReport:
        self.calls.append("write_scores")
        for s in scores:
            self.scores[s.score_id] = s
        return WriteReport(target="recording", written=len(scores), ids=tuple(s.score_id for s in scores))

    def write_dataset_items(self, dataset: str, items: Sequence[DatasetItemRecord]) -> WriteReport:
        self.calls.append("write_dataset_items")
        for item in items:
            self.items[item.item_id(dataset)] = (dataset, item)
        return WriteReport(
            target="recording", written=len(items), ids=tuple(i.item_id(dataset) for i in items)
        )
