"""The writer protocols — scores onto traces, items into datasets — and a recording fake beside them.

A backend implements the protocols it can honour: Langfuse both, Phoenix scores only (its dataset
uploads are not idempotent per item). Every writer owns a connection, so every writer closes, and is
a context manager that closes on exit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, Self

from tracejudge.write._records import DatasetItemRecord, ScoreRecord, WriteReport


class ClosingWriter(Protocol):
    """What every writer shares: ``close`` and ``with writer: ...``."""

    def close(self) -> None:
        """Release the connection; the writer is not used afterwards."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class ScoreWriter(ClosingWriter, Protocol):
    """Where verdicts go: scores (or annotations) on traces and spans."""

    def write_scores(self, scores: Sequence[ScoreRecord]) -> WriteReport:
        """Write (upsert) scores; a rerun with the same records replaces instead of adding."""
        ...


class DatasetWriter(ClosingWriter, Protocol):
    """Where regression samples go: items of a named dataset."""

    def write_dataset_items(
        self, dataset: str, items: Sequence[DatasetItemRecord], *, description: str | None = None
    ) -> WriteReport:
        """Create the dataset if needed and upsert its items; a rerun changes nothing."""
        ...


class RecordingWriter:
    """A fake :class:`ScoreWriter` and :class:`DatasetWriter` that keeps what it was given, keyed like
    the real backends (a rewrite replaces)."""

    def __init__(self) -> None:
        self.scores: dict[str, ScoreRecord] = {}
        """Scores by score id."""
        self.items: dict[str, tuple[str, DatasetItemRecord]] = {}
        """Dataset items by item id: (dataset, item)."""
        self.calls: list[str] = []
        """Method names called, in order."""
        self.closed = False
        """True once closed."""

    def write_scores(self, scores: Sequence[ScoreRecord]) -> WriteReport:
        self.calls.append("write_scores")
        for s in scores:
            self.scores[s.score_id] = s
        return WriteReport(target="recording", written=len(scores), ids=tuple(s.score_id for s in scores))

    def write_dataset_items(
        self,
        dataset: str,
        items: Sequence[DatasetItemRecord],
        *,
        description: str | None = None,  # noqa: ARG002 (the protocol's signature)
    ) -> WriteReport:
        self.calls.append("write_dataset_items")
        for item in items:
            self.items[item.item_id(dataset)] = (dataset, item)
        return WriteReport(
            target="recording", written=len(items), ids=tuple(i.item_id(dataset) for i in items)
        )

    def close(self) -> None:
        self.calls.append("close")
        self.closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
