"""A trace id as people type it: the whole id or a unique prefix of a stored one."""

from __future__ import annotations

from tracejudge._errors import InputError
from tracejudge.store._protocol import Store


def resolve_trace_id(store: Store, given: str) -> str:
    """The stored trace id ``given`` names: itself, or the one stored id it is a prefix of.

    A prefix of several stored ids is an :class:`InputError` listing them; an id that matches
    nothing is returned as given (the caller says it is not stored). Shared by the commands and the
    MCP tools so that an id prefix means the same everywhere."""
    text = given.strip().lower()
    if not text:
        return given
    found: list[str] = []
    for trace_id in store.iter_trace_ids():
        if trace_id == text:
            return trace_id
        if trace_id.startswith(text):
            found.append(trace_id)
    if len(found) == 1:
        return found[0]
    if found:
        shown = ", ".join(found[:10]) + (f" and {len(found) - 10} more" if len(found) > 10 else "")
        raise InputError(
            f"trace id prefix {given!r} matches {len(found)} stored traces: {shown}",
            hint="give more characters of the trace id",
        )
    return given
