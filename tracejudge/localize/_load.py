"""Read tickets (YAML) and index manifests (JSONL), with errors that name the file, line and problem."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from tracejudge._errors import InputError
from tracejudge._inputfile import decode_text, json_lines, no_gc
from tracejudge._yamlfile import node_line, parse_yaml, require_mapping, validation_lines
from tracejudge.schema import ManifestEntry, Ticket

__all__ = ["load_manifest", "load_ticket", "parse_ticket", "ticket_files"]

_TICKET_HINT = (
    'fix the ticket; see "File formats" in the README (required: [{doc_id, version, clause, facts}])'
)
_MANIFEST_FILE_HINT = (
    "give the path of an index manifest (JSONL, one document version per line), or leave out --manifest"
)
_MANIFEST_HINT = (
    'fix that line; each line is one JSON object (see "File formats" in the README):'
    " {doc_id, version, indexed_at, ...}"
)


def _read(path: Path, hint: str) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file", hint=hint) from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not a file", hint=hint) from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read: {exc}", hint=hint) from None
    # utf-8-sig: files saved by Windows editors start with a byte-order mark.
    return decode_text(data, source=str(path))


def load_ticket(path: Path) -> Ticket:
    """Parse a ticket file (DESIGN 5.2). Raises :class:`InputError` naming the file and line."""
    return parse_ticket(_read(path, _TICKET_HINT), source=str(path))


def parse_ticket(text: str, *, source: str = "<ticket>") -> Ticket:
    """Parse a ticket's YAML (or JSON) text; errors name ``source`` and the line."""
    # The collector stays paused from parse to validated ticket: re-enabled between the two, its next
    # pass could be a full one over the whole new tree (how long a test run has been going decides).
    with no_gc():
        return _parse_ticket(text, source)


def _parse_ticket(text: str, source: str) -> Ticket:
    path = source
    data, root = parse_yaml(text, source=source, hint=_TICKET_HINT, column=True)
    data = require_mapping(data, source=source, noun="ticket", hint=_TICKET_HINT)
    for key in ("required", "superseded"):
        # One material written as a mapping rather than a one-item list means the same thing.
        if isinstance(data.get(key), dict):
            data = {**data, key: [data[key]]}
    try:
        ticket = Ticket.model_validate(data)
    except ValidationError as exc:
        msg = validation_lines(exc, lambda loc: f"{path}:{node_line(root, loc)}")
        msg = msg.replace("Input should be a valid tuple", "should be a list")
        raise InputError(f"invalid ticket:\n  {msg}", hint=_TICKET_HINT) from None
    if not ticket.required:
        line = node_line(root, ("required",))
        raise InputError(f"{path}:{line}: required: names no material", hint=_TICKET_HINT)
    return ticket


def load_manifest(path: Path) -> list[ManifestEntry]:
    """Parse an index manifest (DESIGN 5.3, JSONL). Raises :class:`InputError` naming the file and line."""
    text = _read(path, _MANIFEST_FILE_HINT)
    entries: list[ManifestEntry] = []
    for number, data in json_lines(text, source=str(path), hint=_MANIFEST_HINT):
        if not isinstance(data, dict):
            raise InputError(
                f"{path}:{number}: expected a JSON object, got {type(data).__name__}", hint=_MANIFEST_HINT
            )
        try:
            entries.append(ManifestEntry.model_validate(data))
        except ValidationError as exc:
            msg = validation_lines(exc, f"{path}:{number}")
            raise InputError(f"invalid manifest entry:\n  {msg}", hint=_MANIFEST_HINT) from None
    return entries


def ticket_files(path: Path) -> list[Path]:
    """The ticket files a path names: itself, or the ``*.yaml``/``*.yml`` files of a folder, sorted."""
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in (".yaml", ".yml"))
        if not found:
            raise InputError(f"{path}: no ticket files (*.yaml, *.yml) in this folder", hint=_TICKET_HINT)
        return found
    if not path.exists():
        raise InputError(f"{path}: no such file or folder", hint=_TICKET_HINT)
    return [path]
