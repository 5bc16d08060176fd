"""Reading rubric YAML: validated on load, errors naming the file and line."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from pydantic import ValidationError

from tracejudge._errors import InputError
from tracejudge._inputfile import read_input
from tracejudge._yamlfile import node_line, parse_yaml, validation_lines
from tracejudge.schema import LEGACY_CHECK_DEFAULTS, CheckType, JsonSchemaCheck, Rubric

if TYPE_CHECKING:
    import yaml

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
        rubric = Rubric.model_validate(data)
    except ValidationError as exc:
        raise _invalid(exc, data, root, source) from exc
    _check_json_schemas(rubric, root, source)
    return rubric


def _invalid(exc: ValidationError, data: dict[str, Any], root: yaml.Node | None, source: str) -> InputError:
    """The error for a rubric the model rejects: each problem with the file line it is on."""
    whole = next((str(e["msg"]) for e in exc.errors() if not e["loc"]), "")
    top = _whole_rubric_loc(data, whole)
    msg = validation_lines(
        exc,
        lambda loc: f"{source}:{node_line(root, _file_loc(loc) or top, at_key=True)}",
        loc_format=lambda loc: ".".join(str(p) for p in (_file_loc(loc) or top)) or "<top>",
    )
    return InputError("invalid rubric\n  " + msg, hint=_HINT)


def _check_json_schemas(rubric: Rubric, root: yaml.Node | None, source: str) -> None:
    """Each json_schema check's schema must itself be valid; the error names the check's line."""
    from tracejudge.checks import check_schema

    for idx, check in enumerate(rubric.checks):
        if not isinstance(check, JsonSchemaCheck) or check.json_schema is None:
            continue
        try:
            check_schema(check.json_schema)
        except InputError as exc:
            line = node_line(root, ("checks", idx, "schema"), at_key=True)
            raise InputError(f"{source}:{line}: check {check.name!r}: {exc.message}", hint=_HINT) from exc


def _file_loc(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """An error's location as the file spells it: pydantic puts the check's type (the union's tag)
    after ``checks.N``, which the YAML does not have (``checks.0.number.op`` is ``checks.0.op``)."""
    if len(loc) > 2 and loc[0] == "checks" and loc[2] in get_args(CheckType):
        return (*loc[:2], *loc[3:])
    return loc


def _first_repeat(section: str, data: dict[str, Any]) -> tuple[int | str, ...]:
    """Where a section's names first repeat (the section itself when no entry repeats one)."""
    seen: set[Any] = set()
    entries = data.get(section)
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        name = entry.get("name") if isinstance(entry, dict) else None
        if name in seen:
            return (section, i, "name")
        seen.add(name)
    return (section,)


def _unknown_criterion(data: dict[str, Any], message: str) -> tuple[int | str, ...]:
    """The ``criterion`` of the check the message names."""
    checks = data.get("checks")
    for i, c in enumerate(checks if isinstance(checks, list) else []):
        if isinstance(c, dict) and f"{c.get('name')!r}" in message:
            return ("checks", i, "criterion")
    return ("checks",)


# Rules about the whole rubric, by a phrase of their message: where in the file each is broken.
_WHOLE_RUBRIC_RULES: tuple[tuple[str, Callable[[dict[str, Any], str], tuple[int | str, ...]]], ...] = (
    ("criterion names must be unique", lambda data, _: _first_repeat("criteria", data)),
    ("check names must be unique", lambda data, _: _first_repeat("checks", data)),
    ("decides unknown criterion", _unknown_criterion),
    ("need a `judge` section", lambda _data, _: ("criteria",)),
)


def _whole_rubric_loc(data: dict[str, Any], message: str) -> tuple[int | str, ...]:
    """Where a rule about the whole rubric is broken, so the error names that line rather than line 1."""
    for phrase, locate in _WHOLE_RUBRIC_RULES:
        if phrase in message:
            return locate(data, message)
    # A bound on one top-level field names that field.
    rule = message.removeprefix("Value error, ")
    return next(((key,) for key in ("repeat", "overall_threshold") if rule.startswith(key)), ())


def load_rubric(path: str | Path) -> Rubric:
    """Read and validate a rubric file."""
    p = Path(path)
    return parse_rubric(read_input(p, "rubric", "--rubric"), source=str(p))


def rubric_hash(rubric: Rubric) -> str:
    """sha256 of the rubric's canonical JSON."""
    data = rubric.model_dump(mode="json", by_alias=True)
    # Each check as one flat model dumped it (every type's fields, most at their defaults), so that a
    # rubric keeps the hash its calibrations were stored under now that each check type has a model.
    data["checks"] = [{**LEGACY_CHECK_DEFAULTS, **c} for c in data["checks"]]
    canon = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()
