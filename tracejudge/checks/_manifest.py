"""Reading the index manifest (DESIGN 5.3) for the permission check."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from tracejudge._errors import InputError
from tracejudge._inputfile import json_lines, read_input
from tracejudge._yamlfile import validation_lines
from tracejudge.schema import ManifestEntry

_HINT = 'each line is {"doc_id": …, "version": …, "acl": [...]} (see "File formats" in the README)'


def read_manifest(path: str | Path) -> list[ManifestEntry]:
    """Every line of a manifest JSONL file; errors name the line."""
    p = Path(path)
    text = read_input(p, "manifest", "--manifest")
    out: list[ManifestEntry] = []
    for lineno, data in json_lines(text, source=str(p), hint=_HINT):
        try:
            out.append(ManifestEntry.model_validate(data))
        except ValidationError as exc:
            msg = validation_lines(exc, f"{p}:{lineno}")
            raise InputError(f"not a manifest entry:\n  {msg}", hint=_HINT) from None
    return out
