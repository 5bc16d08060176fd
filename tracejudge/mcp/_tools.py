"""What the MCP tools do, without the MCP SDK: each returns the data the matching CLI command prints
with ``--json``, or raises :class:`~tracejudge.InputError` saying what to fix.

Kept apart from the SDK so that the same functions are tested directly and the server module is only
the wiring (arguments, paging, errors as tool errors)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tracejudge._errors import InputError
from tracejudge.schema import ManifestEntry, Ticket
from tracejudge.store import Store

__all__ = ["Toolbox"]

_TICKET_HINT = (
    "pass the ticket as YAML or JSON text (trace_id, required: [{doc_id, version, clause, facts}]),"
    " or the path of a ticket file under the working directory or a folder the server was started with"
)


def _parse_time(value: str | None, name: str) -> datetime | None:
    if value is None or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"{name}: {value!r} is not an ISO 8601 time", hint=f"for example {name}=2026-11-01T00:00:00Z"
        ) from None
    if parsed.tzinfo is None:
        from datetime import UTC

        parsed = parsed.replace(tzinfo=UTC)
    return parsed


@dataclass
class Toolbox:
    """The tools' shared settings: the store, the folders paths may name, and whether writing is on."""

    store: Store
    roots: Sequence[Path] = field(default_factory=lambda: [Path.cwd()])
    """Folders whose files (tickets, manifests, rubrics, suites) the tools may read or write."""
    allow_write: bool = False
    """Write-back and files written by ``build_sample``; off unless the server runs with --allow-write."""
    store_url: str | None = None
    """The store's URL as the server was given it: a resume command the tools suggest names it (without
    its secrets) — the one who runs it is not in the server's environment. None: not named."""

    # -- paths -----------------------------------------------------------------------------------

    def path(self, value: str, *, what: str) -> Path:
        """``value`` as a path inside one of the allowed folders, or an :class:`InputError`."""
        raw = Path(value).expanduser()
        resolved = (raw if raw.is_absolute() else Path.cwd() / raw).resolve()
        for root in self.roots:
            if resolved == root or resolved.is_relative_to(root):
                return resolved
        allowed = ", ".join(str(r) for r in self.roots)
        raise InputError(
            f"{what} {value!r} is outside the folders this server may read ({allowed})",
            hint="use a path under one of them, or restart `tracejudge mcp` with --root FOLDER",
        )

    def _require_write(self, what: str) -> None:
        if not self.allow_write:
            raise InputError(
                f"{what} writes outside the store, and this server is read-only",
                hint="restart `tracejudge mcp` with --allow-write to allow it",
            )

    # -- traces ----------------------------------------------------------------------------------

    def list_traces(
        self, *, limit: int | None = 50, from_: str | None = None, to: str | None = None
    ) -> list[dict[str, Any]]:
        """``tracejudge traces list --json``: stored traces, newest first."""
        if limit is not None and limit < 1:
            raise InputError(f"limit must be at least 1, not {limit}", hint="leave it out for 50")
        since, until = _parse_time(from_, "from"), _parse_time(to, "to")
        if until is None:
            rows = self.store.list_traces(limit=limit, since=since)
        else:
            rows = [
                r
                for r in self.store.list_traces(since=since)
                if r.start_time is None or r.start_time <= until
            ][:limit]
        return [r.model_dump(mode="json") for r in rows]

    def trace_id(self, value: str) -> str:
        """A stored trace's id (given whole or as a unique prefix, as ``traces show`` takes it); an
        :class:`InputError` naming what to do when none is stored."""
        from tracejudge.store import resolve_trace_id

        if not value.strip():
            raise InputError("trace_id is empty", hint="call list_traces to see the stored traces")
        trace_id = resolve_trace_id(self.store, value).strip().lower()
        if not self.store.get_spans(trace_id):
            raise InputError(
                f"no spans stored for trace {trace_id}",
                hint="call list_traces to see the stored traces, or collect the trace first"
                " (`tracejudge collect otlp|file|langfuse|phoenix`)",
            )
        return trace_id

    def show_trace(self, trace_id: str) -> dict[str, Any]:
        """``tracejudge traces show TRACE_ID --json``: the task record."""
        from tracejudge.normalize import normalize

        tid = self.trace_id(trace_id)
        return normalize(self.store.get_spans(tid)).shown()

    # -- triage ----------------------------------------------------------------------------------

    def ticket(self, value: str) -> tuple[Ticket, Path | None]:
        """A ticket from YAML/JSON text or from a file path (inside the allowed folders)."""
        from tracejudge.localize import load_ticket, parse_ticket

        text = value.strip()
        if not text:
            raise InputError("ticket is empty", hint=_TICKET_HINT)
        looks_inline = "\n" in text or text.startswith("{") or ":" in text.split("/", 1)[0]
        if not looks_inline:
            path = self.path(text, what="ticket")
            return load_ticket(path), path
        return parse_ticket(value, source="<ticket argument>"), None

    def manifest(self, value: str | None) -> list[ManifestEntry] | None:
        """The index manifest at ``value`` (inside the allowed folders), or None."""
        from tracejudge.localize import load_manifest

        if value is None or not value.strip():
            return None
        return load_manifest(self.path(value.strip(), what="manifest"))

    def triage(
        self,
        ticket: str,
        manifest: str | None = None,
        trace_id: str | None = None,
        write_back: str | None = None,
    ) -> dict[str, Any]:
        """``tracejudge triage [TRACE_ID] --ticket FILE [--manifest M] [--write-back T] --json``."""
        from pydantic import BaseModel

        from tracejudge.localize import triage_tickets

        if write_back:
            self._require_write("write_back")
        parsed, path = self.ticket(ticket)
        manifest_path = (
            self.path(manifest.strip(), what="manifest") if manifest and manifest.strip() else None
        )
        if trace_id is not None:
            trace_id = self.trace_id(trace_id)
        elif parsed.trace_id:
            self.trace_id(parsed.trace_id)
        with tempfile.TemporaryDirectory(prefix="tracejudge-mcp-") as tmp:
            if path is None:
                # The library reads ticket files; text given inline becomes one, named by its ticket id.
                path = Path(tmp) / f"{parsed.ticket or 'ticket'}.yaml"
                path.write_text(ticket, "utf-8")
            outcome = triage_tickets(
                self.store,
                path,
                trace_id=trace_id,
                manifest_path=manifest_path,
                write_back=write_back or None,
            )
        data = outcome.json()
        return data.model_dump(mode="json") if isinstance(data, BaseModel) else data

    # -- scoring ---------------------------------------------------------------------------------

    def score_trace(
        self, trace_id: str, rubric: str, manifest: str | None = None, write_back: str | None = None
    ) -> dict[str, Any]:
        """``tracejudge score --rubric R --trace ID [--manifest M] [--write-back T] --json``: one
        trace scored with hard checks and the rubric's judge, recorded as a run."""
        from tracejudge.judge import load_rubric, parse_rubric
        from tracejudge.runs import resume_store_arg, score_traces

        if write_back:
            self._require_write("write_back")
        tid = self.trace_id(trace_id)
        text = rubric.strip()
        if "\n" in text:
            parsed, source = parse_rubric(rubric, source="<rubric argument>"), "<rubric argument>"
        else:
            path = self.path(text, what="rubric")
            parsed, source = load_rubric(path), str(path)
        manifest_path = (
            self.path(manifest.strip(), what="manifest") if manifest and manifest.strip() else None
        )
        outcome = score_traces(
            self.store,
            parsed,
            rubric_path=source,
            trace_ids=[tid],
            manifest_path=manifest_path,
            targets=[write_back] if write_back else (),
            # Whoever runs the resume command is not in this server's environment: name its store.
            store_arg=resume_store_arg(self.store_url, environment=None) if self.store_url else None,
        )
        return outcome.json()

    # -- drafts and sweeps ------------------------------------------------------------------------

    def draft_ticket(self, trace_id: str, manifest: str, feedback: str | None = None) -> dict[str, Any]:
        """``tracejudge ticket draft --trace ID --manifest M [--feedback TEXT] --json``."""
        from tracejudge.sweep import draft_ticket_for

        tid = self.trace_id(trace_id)
        entries = self.manifest(manifest) or []
        data: dict[str, Any] = draft_ticket_for(self.store, tid, entries, feedback or "").model_dump(
            mode="json"
        )
        return data

    def sweep(self, manifest: str, from_: str | None = None, to: str | None = None) -> dict[str, Any]:
        """``tracejudge triage --sweep --manifest M [--from T] [--to T] --json``."""
        from tracejudge.sweep import sweep

        entries = self.manifest(manifest) or []
        since, until = _parse_time(from_, "from"), _parse_time(to, "to")
        data: dict[str, Any] = sweep(self.store, entries, since=since, until=until).model_dump(mode="json")
        return data

    # -- regression samples ----------------------------------------------------------------------

    def build_sample(self, ticket: str, out: str, manifest: str | None = None) -> dict[str, Any]:
        """``tracejudge regress build --ticket FILE [--manifest M] --out SUITE --json`` for one ticket."""
        from tracejudge.regress import build_suite

        self._require_write("build_sample")
        parsed, path = self.ticket(ticket)
        out_dir = self.path(out, what="out")
        entries = self.manifest(manifest) or []
        with tempfile.TemporaryDirectory(prefix="tracejudge-mcp-") as tmp:
            if path is None:
                path = Path(tmp) / f"{parsed.ticket or 'ticket'}.yaml"
                path.write_text(json.dumps(parsed.model_dump(mode="json", exclude_none=True)), "utf-8")
            report = build_suite(self.store, out_dir, tickets=[path], manifest=entries)
        data: dict[str, Any] = report.model_dump(mode="json")
        return data
