"""What the pulling collectors share: the per-trace markers and the watermark that make a pull resumable.

A collector names its markers and watermarks with its own prefix (``langfuse``, ``phoenix``):
* ``<prefix>.trace:<id>`` is set only after a trace's spans are stored; a listed trace with a
  marker is not fetched again;
* ``<prefix>.watermark:<scope hash>`` holds ``{"from", "upto"}``: the window a complete run covered.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tracejudge.store import Store
from tracejudge_collectors._time import parse_time


def scope_key(prefix: str, scope: Sequence[Any]) -> str:
    """The meta key of the watermark of one scope (server and whatever selects the traces)."""
    text = json.dumps(list(scope), separators=(",", ":"))
    return f"{prefix}.watermark:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def marker_key(prefix: str, trace_id: str) -> str:
    """The meta key marking a trace as stored."""
    return f"{prefix}.trace:{trace_id.lower()}"


def parse_watermark(raw: str | None) -> tuple[datetime | None, datetime] | None:
    """(start of the covered window or None for "from the beginning", latest covered trace start)."""
    if not raw:
        return None
    try:
        data = json.loads(raw)
        upto = parse_time(data["upto"])
    except (ValueError, KeyError, TypeError):
        return None
    if upto is None:
        return None
    return parse_time(data.get("from")), upto


class Window:
    """Where a run lists from, given the watermark an earlier run left for the same scope."""

    def __init__(self, store: Store, key: str, from_time: datetime | None, lag: timedelta) -> None:
        self.store = store
        self.key = key
        covered = parse_watermark(store.get_meta(key))
        self.lower = from_time
        """List traces that started at or after this (None: from the beginning)."""
        self.coverage_from = from_time
        self.watermark: datetime | None = None
        """The latest trace start an earlier complete run covered, when it helps this run."""
        # The watermark only helps when the window it covers starts no later than the one asked for.
        if covered is not None and (
            covered[0] is None or (from_time is not None and from_time >= covered[0])
        ):
            self.coverage_from, self.watermark = covered
            resume = self.watermark - lag
            self.lower = resume if self.lower is None or resume > self.lower else self.lower

    def advance(
        self, *, complete: bool, latest: datetime | None, iso: Callable[[datetime], str]
    ) -> datetime | None:
        """Store the new watermark when the run covered its whole window; the watermark after the run."""
        if not (complete and latest is not None):
            return self.watermark
        value = json.dumps(
            {"from": iso(self.coverage_from) if self.coverage_from else None, "upto": iso(latest)}
        )
        # Compare-and-set: a puller of the same scope that finished meanwhile with a watermark at
        # least as good (starting no later, reaching no earlier) keeps it; otherwise this one wins.
        while True:
            raw = self.store.get_meta(self.key)
            theirs = parse_watermark(raw)
            if theirs is not None and _covers(theirs, self.coverage_from, latest):
                return theirs[1]
            if self.store.compare_and_set_meta(self.key, raw, value):
                return latest


def _covers(theirs: tuple[datetime | None, datetime], start: datetime | None, upto: datetime) -> bool:
    """Whether a watermark covering ``theirs`` covers the window ``start``..``upto`` too."""
    starts_earlier = theirs[0] is None or (start is not None and theirs[0] <= start)
    return starts_earlier and theirs[1] >= upto


class PullCounts(BaseModel):
    """What every pull reports, whatever the backend; each collector's ``PullReport`` adds its own."""

    model_config = ConfigDict(frozen=True)

    base_url: str
    """The server pulled from."""
    listed: int = 0
    """Traces listed in the window."""
    fetched: int = 0
    """Traces fetched and stored in this run."""
    skipped: int = 0
    """Listed traces already stored by an earlier run."""
    spans_new: int = 0
    """Spans newly stored."""
    retries: int = 0
    """Requests retried (rate limits, server errors, dropped connections)."""
    complete: bool = True
    """False when ``--limit`` stopped the run before the window was done."""
    watermark: str | None = None
    """Latest trace start covered; the next run continues from here."""
    warnings: tuple[str, ...] = Field(default_factory=tuple)
    """Things worth knowing: deprecation notices, nothing matched, and the like."""


def summary_tail(report: PullCounts) -> list[str]:
    """The lines every pull summary ends with: counts, retries, an unfinished window, warnings."""
    lines = [
        f"listed {report.listed} traces: fetched {report.fetched}, already stored {report.skipped};"
        f" {report.spans_new} new spans"
    ]
    if report.retries:
        lines.append(f"{report.retries} requests retried (rate limits, server errors, dropped connections)")
    if not report.complete:
        lines.append("stopped at --limit: run again to continue")
    lines.extend(f"warning: {w}" for w in report.warnings)
    return lines
