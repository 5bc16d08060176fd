"""Reading rubric YAML: validated on load, errors naming the file and line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import ValidationError

from tracejudge._errors import InputError
from tracejudge._inputfile import read_input
from tracejudge._yamlfile import node_line, parse_yaml, validation_lines
from tracejudge.schema import Rubric

_HINT = (
    'see "File formats" in the README for the rubric layout: name, version, judge, judged, criteria, checks'
)


def parse_rubric(text: str, *, source: str = "<rubric>") -> Rubric:
    """Parse and validate rubric YAML text. Raises :class:`InputError` naming ``source:line``."""
    data, root = parse_yaml(text, source=source, hint=_HINT)
    if not isinstance(data, dict):
        raise InputError(f"{source}:1: a rubric is a YAML mapping", hint=_HINT)
    if "version" in data and isinstance(data["version"], float):
        # 1.0 and 1 must not silently become the same series.
        data["version"] = str(data["version"])
    try:
        from tracejudge.checks._schema import check_schema

        rubric = Rubric.model_validate(data)
        for check in rubric.checks:
            if check.json_schema is not None:
                try:
                    check_schema(check.json_schema)
                except InputError as exc:
                    idx = rubric.checks.index(check)
                    line = node_line(root, ("checks", idx, "schema"), at_key=True)
                    raise InputError(
                        f"{source}:{line}: check {check.name!r}: {exc.message}", hint=_HINT
                    ) from exc
        return rubric
    except ValidationError as exc:
        msg = validation_lines(
            exc,
            lambda loc: f"{source}:{node_line(root, loc, at_key=True)}",
            loc_format=lambda loc: ".".join(str(p) for p in loc) or "<top>",
        )
        raise InputError("invalid rubric\n  " + msg, hint=_HINT) from exc


def load_rubric(path: str | Path) -> Rubric:
    """Read and validate a rubric file."""
    p = Path(path)
    return parse_rubric(read_input(p, "rubric", "--rubric"), source=str(p))


def rubric_hash(rubric: Rubric) -> str:
    """sha256 of the rubric's canonical JSON."""
    canon = json.dumps(rubric.model_dump(mode="json", by_alias=True), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()
