"""Reading YAML input files (tickets, suite samples, rubrics) so that every error names the file
and the line: broken YAML at its mark, a pydantic error at the node its location points to."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import yaml
from pydantic import ValidationError

from tracejudge._errors import InputError
from tracejudge._inputfile import safe_load_yaml

__all__ = ["loc_text", "node_line", "parse_yaml", "require_mapping", "validation_lines"]

Loc = tuple[int | str, ...]


def parse_yaml(text: str, *, source: str, hint: str, column: bool = False) -> tuple[Any, yaml.Node | None]:
    """The data and the node tree of one YAML document; every error (broken YAML, a value that
    cannot be constructed, runaway nesting) is an :class:`InputError` ``source:line[:column]: …``
    (see :func:`tracejudge._inputfile.safe_load_yaml`)."""
    return safe_load_yaml(text, source=source, hint=hint, column=column)


def require_mapping(data: Any, *, source: str, noun: str, hint: str) -> dict[str, Any]:
    """``data`` when it is a mapping; otherwise ``source:1: the <noun> is empty`` (or a list …)."""
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}, not a mapping"
        raise InputError(f"{source}:1: the {noun} is {kind}", hint=hint)
    return data


def loc_text(loc: Sequence[int | str]) -> str:
    """A pydantic error location as ``required[0].doc_id``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def node_line(root: yaml.Node | None, loc: Sequence[int | str], *, at_key: bool = False) -> int:
    """1-based line of the YAML node at ``loc`` (or of its deepest existing ancestor); with
    ``at_key``, of the key that names a mapping value rather than of the value itself."""
    if root is None:
        return 1
    node: yaml.Node = root
    line = int(node.start_mark.line) + 1
    for part in loc:
        step = _child(node, part, at_key=at_key)
        if step is None:
            break
        node, named_at = step
        line = int(named_at.start_mark.line) + 1
    return line


def _child(node: yaml.Node, part: int | str, *, at_key: bool) -> tuple[yaml.Node, yaml.Node] | None:
    """The node at ``part`` under ``node`` and the node whose line names it (with ``at_key``, a
    mapping value's key), or None when there is none."""
    if isinstance(node, yaml.MappingNode):
        return next(
            (
                (value, key if at_key else value)
                for key, value in node.value
                if isinstance(key, yaml.ScalarNode) and key.value == str(part)
            ),
            None,
        )
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        return node.value[part], node.value[part]
    return None


def validation_lines(
    exc: ValidationError,
    where: str | Callable[[Loc], str],
    *,
    loc_format: Callable[[Loc], str] = loc_text,
) -> str:
    """One line per pydantic error, ``<where>: <location>: <message>``, joined for an indented list;
    ``where`` is the same for every error (``file:line``) or computed from its location.
    A validator's ``Value error, `` prefix is dropped: the message is the reader's, not Python's."""
    lines = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        lines.append(f"{where if isinstance(where, str) else where(loc)}: {loc_format(loc)}: {msg}")
    return "\n  ".join(lines)
