"""Reading rubric YAML: validated on load, errors naming the file and line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from tracejudge._errors import InputError
from tracejudge.schema import Rubric

_HINT = (
    'see "File formats" in the README for the rubric layout: name, version, judge, judged, criteria, checks'
)


def _line_of(root: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """1-based line of the YAML node a pydantic error location points at (deepest node found)."""
    node = root
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(key):
                    nxt = v
                    line = k.start_mark.line + 1
                    break
            if nxt is None:
                return line
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def parse_rubric(text: str, *, source: str = "<rubric>") -> Rubric:
    """Parse and validate rubric YAML text. Raises :class:`InputError` naming ``source:line``."""
    try:
        root = yaml.compose(text)
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{where}: broken YAML: {problem}", hint=_HINT) from exc
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
                    line = _line_of(root, ("checks", idx, "schema"))
                    raise InputError(
                        f"{source}:{line}: check {check.name!r}: {exc.message}", hint=_HINT
                    ) from exc
        return rubric
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            line = _line_of(root, loc)
            path = ".".join(str(p) for p in loc) or "<top>"
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{source}:{line}: {path}: {msg}")
        raise InputError("invalid rubric\n  " + "\n  ".join(lines), hint=_HINT) from exc


def load_rubric(path: str | Path) -> Rubric:
    """Read and validate a rubric file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot read the rubric {p}: {exc.strerror}", hint="check the --rubric path"
        ) from exc
    return parse_rubric(text, source=str(p))


def rubric_hash(rubric: Rubric) -> str:
    """sha256 of the rubric's canonical JSON."""
    canon = json.dumps(rubric.model_dump(mode="json", by_alias=True), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()
