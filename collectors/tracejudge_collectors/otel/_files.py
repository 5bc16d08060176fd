"""Import OTLP files (and folders of them) into the store."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from tracejudge import InputError
from tracejudge.schema import RawSpan
from tracejudge.store import EncodedSpan, Store
from tracejudge_collectors.otel._decode import DecodeResult
from tracejudge_collectors.otel._read import iter_otlp_file_for_store

__all__ = ["FILE_SUFFIXES", "FileImport", "ImportSummary", "expand_paths", "import_files"]

FILE_SUFFIXES = (".json", ".jsonl", ".pb", ".binpb", ".bin", ".proto", ".otlp", ".protobuf")
"""Suffixes (optionally followed by ``.gz``) picked up when a folder is given."""

_BATCH = 2000


class FileImport(BaseModel):
    """What one file contributed."""

    model_config = ConfigDict(frozen=True)

    path: str
    """The file read."""
    spans: int = 0
    """Valid spans read from the file."""
    new: int = 0
    """Of those, spans not already in the store."""
    rejected: int = 0
    """Invalid spans (and log records) skipped (bad ids, malformed fields, no span context)."""
    log_events: int = 0
    """Log records with a span context read from OTLP/JSON log requests in the file (repeats included)."""
    errors: list[str] = []
    """Why spans were skipped, warnings about truncated values, or why the file could not be read."""
    failed: bool = False
    """True when the file could not be read to its end (spans before the fault are stored)."""


class ImportSummary(BaseModel):
    """The result of ``collect file``."""

    model_config = ConfigDict(frozen=True)

    files: list[FileImport]
    """One entry per file, in the order read."""
    spans: int
    """Valid spans read from all files."""
    new: int
    """Spans new to the store."""
    rejected: int
    """Invalid spans and log records skipped."""
    log_events: int = 0
    """Log records with a span context read from all files."""
    failed: int
    """Files that could not be read to their end."""


def expand_paths(paths: Iterable[Path]) -> tuple[list[Path], list[FileImport]]:
    """Files to read (folders expanded recursively, by :data:`FILE_SUFFIXES`), and entries for
    paths that do not exist."""
    files: list[Path] = []
    missing: list[FileImport] = []
    for path in paths:
        if path.is_dir():
            files.extend(
                p
                for p in sorted(path.rglob("*"))
                if p.is_file() and not p.name.startswith(".") and _wanted(p)
            )
        elif path.exists():
            files.append(path)
        else:
            missing.append(
                FileImport(
                    path=str(path),
                    failed=True,
                    errors=[f"{path} does not exist; check the path (folders are read recursively)"],
                )
            )
    return files, missing


def _wanted(path: Path) -> bool:
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return name.endswith(FILE_SUFFIXES)


def import_files(
    store: Store,
    paths: Sequence[Path],
    *,
    on_file: Callable[[FileImport], None] | None = None,
) -> ImportSummary:
    """Read OTLP files into the store, streaming in batches.

    A file that cannot be read to its end is reported (``failed``) and the next file is read; spans
    read before the fault stay stored, and rereading a file stores nothing twice.
    """
    files, results = expand_paths(paths)
    for path in files:
        result = _import_one(store, path)
        results.append(result)
        if on_file is not None:
            on_file(result)
    return ImportSummary(
        files=results,
        spans=sum(r.spans for r in results),
        new=sum(r.new for r in results),
        rejected=sum(r.rejected for r in results),
        log_events=sum(r.log_events for r in results),
        failed=sum(r.failed for r in results),
    )


def _import_one(store: Store, path: Path) -> FileImport:
    spans = new = rejected = log_events = 0
    errors: list[str] = []
    batch: list[RawSpan | EncodedSpan] = []
    failed = False
    try:
        # Protobuf spans as the receiver stores them: in their own OTLP bytes, unless one needs a note.
        for chunk in iter_otlp_file_for_store(path):
            rejected += chunk.rejected
            errors.extend(chunk.errors[: max(0, 20 - len(errors))])
            batch.extend(chunk.spans)
            if isinstance(chunk, DecodeResult) and chunk.log_events:
                log_events += len(chunk.log_events)
                store.put_log_events(chunk.log_events)
            if len(batch) >= _BATCH:
                spans += len(batch)
                new += store.put_spans(batch)
                batch = []
    except InputError as exc:
        failed = True
        errors.append(str(exc))
    if batch:
        spans += len(batch)
        new += store.put_spans(batch)
    return FileImport(
        path=str(path),
        spans=spans,
        new=new,
        rejected=rejected,
        log_events=log_events,
        errors=errors,
        failed=failed,
    )
