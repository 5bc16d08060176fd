"""Reading the index manifest (DESIGN 5.3) for the permission check."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from tracejudge._errors import InputError
from tracejudge.schema import ManifestEntry


def read_manifest(path: str | Path) -> list[ManifestEntry]:
    """Every line of a manifest JSONL file; errors name the line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot read the manifest {p}: {exc.strerror}", hint="check the --manifest path"
        ) from exc
    out: list[ManifestEntry] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(ManifestEntry.model_validate(json.loads(line)))
        except (ValueError, ValidationError) as exc:
            first = str(exc).splitlines()[0]
            raise InputError(
                f"{p}:{lineno}: not a manifest entry: {first}",
                hint='each line is {"doc_id": …, "version": …, "acl": [...]}'
                ' (see "File formats" in the README)',
            ) from exc
    return out
