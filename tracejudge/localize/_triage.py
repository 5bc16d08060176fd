"""``triage`` as a library call: tickets (a file or a folder) + the store -> localizations, stored
and optionally written back. The CLI renders a :class:`TriageOutcome`; :meth:`TriageOutcome.json`
is exactly what ``tracejudge triage --json`` prints, for any other caller (an MCP server) to return.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tracejudge._errors import InputError, StoreDamageError
from tracejudge._redact import redact
from tracejudge.localize._judge import UsageJudge
from tracejudge.localize._llm_judge import LLMUsageJudge
from tracejudge.localize._load import load_manifest, load_ticket, ticket_files
from tracejudge.localize._localize import localize, trace_not_stored, trace_unreadable
from tracejudge.localize._session import SessionContext, localize_session
from tracejudge.localize._summary import verdict_counts
from tracejudge.normalize import incompleteness, normalize
from tracejudge.schema import JudgeConfig, Localization, ManifestEntry, RawSpan, TaskRecord, Ticket
from tracejudge.store import Store

__all__ = ["NOT_STORED_HINT", "TicketResult", "TriageOutcome", "triage_tickets"]

NOT_STORED_HINT = "run `tracejudge traces list` to see stored traces, or collect the trace first"


@dataclass(frozen=True)
class TicketResult:
    """One ticket's localization."""

    ticket_file: Path
    """The ticket file it came from."""
    localization: Localization
    """The verdict with its stages."""
    stored: bool = True
    """False when the trace had no stored spans, or they (or an earlier turn's) do not read back (in a
    folder): the localization is unconfirmed."""
    unreadable: bool = False
    """True when the trace, or an earlier turn of its session, is stored but does not read back (a
    damaged store)."""


@dataclass(frozen=True)
class TriageOutcome:
    """What one triage did: the localizations, what write-back landed, warnings for the user."""

    folder: bool
    """True when the tickets came from a folder (the JSON is then ``{"results", "summary"}``)."""
    results: tuple[TicketResult, ...]
    """One per ticket; in a folder sorted by ticket file, traces not stored included."""
    write_back: dict[str, Any] | None = None
    """What ``--write-back`` wrote and what failed (target, written, failed), or None."""
    warnings: tuple[str, ...] = field(default_factory=tuple)
    """Things worth seeing that did not stop the triage (a ticket naming another trace)."""

    @property
    def unstored(self) -> tuple[TicketResult, ...]:
        """The tickets whose trace had no stored spans or does not read back."""
        return tuple(r for r in self.results if not r.stored)

    @property
    def summary(self) -> dict[str, int]:
        """Verdict counts over every ticket."""
        return verdict_counts(r.localization for r in self.results)

    @property
    def write_failed(self) -> bool:
        """Whether some verdict could not be written back (the command then exits 1)."""
        return bool(self.write_back and self.write_back["failed"])

    def json(self) -> BaseModel | dict[str, Any]:
        """Exactly what ``tracejudge triage --json`` prints (a record, or JSON-ready data)."""
        if self.folder:
            items = [
                {**r.localization.model_dump(mode="json"), "ticket_file": str(r.ticket_file)}
                for r in self.results
            ]
            data: dict[str, Any] = {"results": items, "summary": self.summary}
            if self.write_back is not None:
                data["write_back"] = self.write_back
            return data
        loc = self.results[0].localization
        if self.write_back is None:
            return loc
        return {**loc.model_dump(mode="json"), "write_back": self.write_back}


@dataclass
class _Warnings:
    """Warnings kept for the outcome and passed to ``on_warning`` as they arise."""

    on_warning: Callable[[str], None] | None
    texts: list[str] = field(default_factory=list)

    def __call__(self, text: str) -> None:
        self.texts.append(text)
        if self.on_warning is not None:
            self.on_warning(text)


def _trace_id(arg: str | None, ticket: Ticket, path: Path, warn: Callable[[str], None]) -> str:
    own = (ticket.trace_id or "").strip().lower()
    if arg and own and arg.strip().lower() != own:
        # The command line wins, but a ticket about another trace is usually a mix-up worth seeing.
        warn(
            f"warning: {path}: the ticket names trace {own}, the command line {arg.strip().lower()};"
            " triaging the command line's trace"
        )
    trace_id = arg or ticket.trace_id
    if not trace_id:
        raise InputError(
            f"{path}: no trace id: the ticket has no trace_id and none was given",
            hint="put trace_id in the ticket, or give it: tracejudge triage TRACE_ID --ticket FILE",
        )
    return trace_id.strip().lower()


def _triage_one(
    store: Store,
    trace_id: str,
    ticket: Ticket,
    manifest: Sequence[ManifestEntry] | None,
    judge: UsageJudge | None = None,
    *,
    batch: bool = False,
    session_id: str | None = None,
) -> Localization | None:
    """The localization; None (in a batch) or an error (alone) when the trace is not stored.

    With a session (``session_id``, the ticket's, or the one the trace records) the stored turns
    before this trace are read too (DESIGN 5.5 Sessions)."""
    spans = _read(store, trace_id, f"trace {trace_id}")
    if not spans:
        if batch:
            return None
        raise InputError(f"no spans stored for trace {trace_id}", hint=NOT_STORED_HINT)
    now = datetime.now(UTC)  # a trace that lacks spans may still be arriving (localize.STILL_ARRIVING)
    task = normalize(spans)
    sid = session_id or ticket.session_id or task.metadata.get("session_id") or store.trace_session(trace_id)
    if not sid:
        return _with_notes(localize(task, ticket, manifest, judge=judge, now=now), task)
    session = SessionContext(
        session_id=str(sid), earlier=tuple(_earlier_turns(store, str(sid), trace_id, task))
    )
    return _with_notes(localize_session(task, session, ticket, manifest, judge=judge, now=now), task)


def _earlier_turns(store: Store, session_id: str, trace_id: str, task: TaskRecord) -> Iterator[TaskRecord]:
    """The stored turns of the session before this trace (``task``), normalized, in order."""
    for turn in store.session_traces(session_id):
        if turn.trace_id == trace_id:
            return
        if task.start_time is not None and turn.start_time is not None and turn.start_time > task.start_time:
            return
        # Damaged, it stops this trace's triage: the conversation cannot be read whole.
        turn_spans = _read(
            store, turn.trace_id, f"trace {turn.trace_id}, an earlier turn of session {session_id}"
        )
        if turn_spans:
            yield normalize(turn_spans)


def _read(store: Store, trace_id: str, what: str) -> list[RawSpan]:
    """The trace's stored spans; when they do not read back, the store's error saying ``what`` they are."""
    try:
        return store.get_spans(trace_id)
    except StoreDamageError as exc:
        raise StoreDamageError(f"{what}: {exc.message}", hint=exc.hint) from exc


def _with_notes(loc: Localization, task: TaskRecord) -> Localization:
    """Beside the verdict: what may be missing from the trace itself (late or lost spans)."""
    notes = [*loc.notes, *incompleteness(task)]
    return loc.model_copy(update={"notes": tuple(dict.fromkeys(notes))}) if notes else loc


def _write_back(target: str, results: Sequence[Localization]) -> dict[str, Any]:
    """Write the verdicts and say what landed: every failed write with its ticket, trace, score and
    the backend's reason. The result also goes into ``--json`` under ``write_back``."""
    try:
        from tracejudge.write import triage_scores, write_triage
    except ImportError as exc:
        raise InputError(
            f"--write-back is not available in this installation: {exc}",
            hint="reinstall tracejudge, or run triage without --write-back",
        ) from None
    report: Any = write_triage(target, results)
    # A failure names a score id; map it back to what the user knows (ticket and trace).
    by_id = {
        score.score_id: (score.name, r) for score, r in zip(triage_scores(results), results, strict=True)
    }
    failed: list[dict[str, Any]] = []
    for f in getattr(report, "failed", ()):
        name, loc = by_id.get(f.key, (None, None))
        failed.append(
            {
                "ticket": loc.ticket if loc is not None else None,
                "trace_id": loc.trace_id if loc is not None else None,
                "score_name": name,
                "score_id": f.key,
                "status": getattr(f, "status", None),
                "reason": redact(str(f.reason)),
            }
        )
    return {"target": target, "written": getattr(report, "written", None), "failed": failed}


def _localize_jobs(
    store: Store,
    jobs: Sequence[tuple[Path, Ticket, str]],
    manifest: Sequence[ManifestEntry] | None,
    judge: JudgeConfig | None,
    *,
    batch: bool,
    session_id: str | None,
) -> tuple[list[TicketResult], list[TicketResult]]:
    """Each (ticket file, ticket, trace id) localized, with one usage judge for all (closed after):
    the localized ones, and (in a batch) those whose trace is not stored."""
    usage_judge = LLMUsageJudge(judge, cache=store) if judge is not None else None
    rows: list[TicketResult] = []
    unstored: list[TicketResult] = []
    try:
        for p, t, tid in jobs:
            try:
                loc = _triage_one(store, tid, t, manifest, usage_judge, batch=batch, session_id=session_id)
            except StoreDamageError as exc:
                if not batch:
                    raise
                # As a trace not stored: only this ticket is unconfirmed, and nothing is kept or written
                # back for it (the store's damage is not a verdict on the agent).
                lost = trace_unreadable(t, tid, exc.reason)
                unstored.append(TicketResult(p, lost, stored=False, unreadable=True))
                continue
            if loc is None:
                # One trace not collected yet does not stop a batch: its row says what is missing.
                unstored.append(TicketResult(p, trace_not_stored(t, tid), stored=False))
            else:
                rows.append(TicketResult(p, loc))
    finally:
        if usage_judge is not None:
            usage_judge.close()
    return rows, unstored


def _keep(store: Store, rows: Sequence[TicketResult]) -> None:
    """Store each localization under its ticket (the ticket's name, else its file's stem)."""
    for r in rows:
        # Kept for `tracejudge report` / `serve`: a rerun adds an entry, history is never rewritten.
        store.put_triage_result(r.localization, ticket=r.localization.ticket or r.ticket_file.stem)


def triage_tickets(
    store: Store,
    ticket_path: Path,
    *,
    trace_id: str | None = None,
    manifest_path: Path | None = None,
    judge: JudgeConfig | None = None,
    write_back: str | None = None,
    on_warning: Callable[[str], None] | None = None,
    session_id: str | None = None,
) -> TriageOutcome:
    """Localize the ticket at ``ticket_path`` (or every ticket in that folder) against its stored trace.

    Each localization is kept in the store (``report``/``serve`` read them; a rerun adds an entry).
    A single ticket whose trace is not stored raises :class:`InputError`; in a folder such a ticket
    is unconfirmed and the rest go on. ``judge`` reads the answer when its facts do not settle
    used_by_model; ``write_back`` (langfuse or phoenix) writes the verdicts back. Warnings go to
    ``on_warning`` as they arise (so they show even when a later ticket stops the triage) and into
    the outcome.
    """
    folder = ticket_path.is_dir()
    if folder and trace_id:
        raise InputError(
            "TRACE_ID goes with a single ticket file, not a folder",
            hint="put trace_id in each ticket of the folder, or pass one ticket file",
        )
    paths = ticket_files(ticket_path)
    tickets = [(p, load_ticket(p)) for p in paths]
    manifest = load_manifest(manifest_path) if manifest_path is not None else None
    warnings = _Warnings(on_warning)
    jobs = [(p, t, _trace_id(trace_id, t, p, warnings)) for p, t in tickets]
    rows, unstored = _localize_jobs(store, jobs, manifest, judge, batch=folder, session_id=session_id)
    _keep(store, rows)
    results = [r.localization for r in rows]
    # Written before anything is shown so that --json can carry what landed and what did not.
    wb = _write_back(write_back, results) if write_back is not None and results else None
    shown = sorted([*rows, *unstored], key=lambda r: r.ticket_file) if folder else rows
    return TriageOutcome(folder=folder, results=tuple(shown), write_back=wb, warnings=tuple(warnings.texts))
