"""Reading a record another tracejudge stored: fields added since this one are set aside, not fatal."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tracejudge._errors import TracejudgeError
from tracejudge.schema import SCHEMA_VERSION

__all__ = ["UnreadableRecordError", "read_json_record", "read_record"]

_R = TypeVar("_R", bound=BaseModel)

# Each pass sets aside the unknown fields validation names; a field of a record inside a union is named
# only once the member it belongs to is tried, so a nested record may take another pass.
_PASSES = 4

UPGRADE = "upgrade tracejudge (pip install -U tracejudge) to read it"


class UnreadableRecordError(TracejudgeError):
    """A stored record this tracejudge cannot read: a later layout (a higher ``schema_version``), or not
    valid even with the fields it does not know set aside."""


def read_record(model: type[_R], data: Mapping[str, Any], *, what: str = "record") -> _R:
    """``data`` read as ``model``; ``what`` names it in an error (``audit report <id>``).

    Records only gain fields within one ``schema_version`` (JSON is additive): one a later tracejudge
    stored may carry fields this one does not know (AuditReport's ``still_arriving``, say). Those are set
    aside, wherever they sit in the record, and the rest is read — where a record whose fields are all
    forbidden to be unknown was skipped whole, so that a report showed an older audit as the latest.
    A record of a later layout, or one that does not validate but for its unknown fields, raises
    :class:`UnreadableRecordError` saying what to do next."""
    version = data.get("schema_version", SCHEMA_VERSION)
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise UnreadableRecordError(
            f"{what} has schema_version {version}, a later layout than this tracejudge reads"
            f" ({SCHEMA_VERSION})",
            hint=f"it was written by a newer tracejudge: {UPGRADE}",
        )
    current: Any = data
    for _ in range(_PASSES):
        try:
            return model.model_validate(current)
        except ValidationError as exc:
            unknown = [e["loc"] for e in exc.errors() if e["type"] == "extra_forbidden"]
            if not unknown:
                raise _invalid(what, exc) from exc
            current = _without(current, unknown)
    try:
        return model.model_validate(current)
    except ValidationError as exc:
        raise _invalid(what, exc) from exc


def read_json_record(model: type[_R], text: str | bytes, *, what: str = "record") -> _R:
    """``text`` (a record's JSON as a store keeps it) read as ``model``: at once when it validates (every
    record this version wrote), else as :func:`read_record` reads one a later version wrote."""
    try:
        record = model.model_validate_json(text)
    except ValidationError:
        return read_record(model, json.loads(text), what=what)
    if getattr(record, "schema_version", SCHEMA_VERSION) > SCHEMA_VERSION:
        return read_record(model, json.loads(text), what=what)  # raises: a later layout
    return record


def _invalid(what: str, exc: ValidationError) -> UnreadableRecordError:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(the record)"
    return UnreadableRecordError(
        f"{what} does not validate: {where}: {first['msg']}",
        hint=f"it may have been written by another tracejudge version: {UPGRADE}, or remove the record",
    )


def _without(data: Any, locations: list[tuple[int | str, ...]]) -> Any:
    """A copy of ``data`` without the value at each location (a path of keys and list indexes; a step that
    names no key of the value at hand — a union member's tag in the path — is passed over)."""
    out = _copy(data)
    for loc in locations:
        node = out
        for step in loc[:-1]:
            node = _step(node, step)
        if isinstance(node, dict):
            node.pop(loc[-1], None)
    return out


def _step(node: Any, step: int | str) -> Any:
    if isinstance(node, dict) and step in node:
        return node[step]
    if isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
        return node[step]
    return node


def _copy(data: Any) -> Any:
    if isinstance(data, Mapping):
        return {k: _copy(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_copy(v) for v in data]
    return data
