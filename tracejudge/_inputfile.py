"""Reading input files the user names (tickets, manifests, rubrics, labels, suites, cases) so that
every failure is an :class:`InputError` naming the file, the line and what to do — never a traceback.

One path for each shape of file:

- :func:`read_input` — the text (UTF-8, a byte-order mark allowed); bytes that are not UTF-8 (a
  latin-1 file) are reported at their line, with the fix.
- :func:`load_json` — one JSON document; :func:`json_lines` — JSONL, split on ``\\n`` only (a string
  may hold U+2028 or U+0085, which ``str.splitlines`` would split on).
- :func:`safe_load_yaml` — ``yaml.safe_load`` whose constructor errors (an impossible date such as
  ``2026-02-30``, an integer past Python's digit limit) and runaway nesting are reported at the line
  of the value.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tracejudge._errors import InputError

__all__ = [
    "MAX_NESTING",
    "decode_text",
    "json_lines",
    "line_of_offset",
    "load_json",
    "no_gc",
    "read_input",
    "safe_load_yaml",
]

MAX_NESTING = 500
"""Deepest nesting of lists and mappings an input file may have (Python's parsers recurse)."""

_LONG_DIGITS = re.compile(r"\d{4000,}")
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """The cyclic garbage collector paused: reading a large file makes millions of objects, none of
    them cyclic garbage, and the collector's passes over them made reading quadratic (a ticket of 100k
    entries took minutes)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def read_input(path: Path, what: str, option: str) -> str:
    """The text of ``path`` (UTF-8, a byte-order mark dropped); an unreadable file is ``cannot read
    the <what> <path>: <reason>`` with the hint to check ``option``; a file that is not UTF-8 names
    the line of the first bad byte."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(
            f"cannot read the {what} {path}: {exc.strerror}", hint=f"check the {option} path"
        ) from exc
    return decode_text(data, source=str(path))


def decode_text(data: bytes, *, source: str) -> str:
    """``data`` as UTF-8 text (``utf-8-sig``); otherwise an :class:`InputError` at the bad byte's line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{source}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            hint="save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8 FILE > NEW`)",
        ) from None


def line_of_offset(text: str, offset: int) -> int:
    """1-based line of a character offset."""
    return text.count("\n", 0, max(0, offset)) + 1


def _too_deep_line(text: str, limit: int = MAX_NESTING) -> int | None:
    """The line where bracket or indentation nesting first passes ``limit`` (roughly: brackets in
    strings count too), or None."""
    depth = 0
    for i, ch in enumerate(text):
        if ch in "[{":
            depth += 1
            if depth > limit:
                return line_of_offset(text, i)
        elif ch in "]}":
            depth = max(0, depth - 1)
    return None


def _deep_error(source: str, line: int, hint: str) -> InputError:
    return InputError(
        f"{source}:{line}: nested more than {MAX_NESTING} levels deep",
        hint=f"flatten the file; {hint}",
    )


def _number_error(source: str, text: str, hint: str, exc: Exception, first_line: int = 1) -> InputError:
    m = _LONG_DIGITS.search(text)
    line = (line_of_offset(text, m.start()) if m else 1) + first_line - 1
    return InputError(f"{source}:{line}: a number too long to read ({exc})", hint=hint)


def load_json(text: str, *, source: str, hint: str, first_line: int = 1) -> Any:
    """One JSON document; errors name ``source:line[:column]`` (``first_line`` is the line the text
    starts on, for JSONL)."""
    deep = _too_deep_line(text)
    if deep is not None:
        raise _deep_error(source, deep + first_line - 1, hint)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{source}:{exc.lineno + first_line - 1}:{exc.colno}: not valid JSON: {exc.msg}", hint=hint
        ) from None
    except RecursionError:
        raise _deep_error(source, first_line, hint) from None
    except ValueError as exc:  # an integer past Python's digit limit
        raise _number_error(source, text, hint, exc, first_line) from None


def json_lines(text: str, *, source: str, hint: str) -> Iterator[tuple[int, Any]]:
    """(line number, value) of each non-blank line of JSONL text, split on ``\\n`` only."""
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield number, load_json(line, source=source, hint=hint, first_line=number)


def safe_load_yaml(
    text: str, *, source: str, hint: str, column: bool = False
) -> tuple[Any, yaml.Node | None]:
    """The data and the node tree of one YAML document. Broken YAML, a value YAML cannot construct
    (``2026-02-30``, ``25:61`` as a time, a 5,000-digit integer) and nesting past
    :data:`MAX_NESTING` are :class:`InputError` ``source:line[:column]: problem``."""
    deep = _too_deep_line(text)
    if deep is None:
        deep = _too_deep_indent(text)
    if deep is not None:
        raise _deep_error(source, deep, hint)
    root: yaml.Node | None = None
    try:
        # One parse (libyaml's, when PyYAML has it: ~10x faster on a 7 MB ticket) gives the node tree
        # the errors are located in, and the data is constructed from that tree.
        loader = _Loader(text)
        try:
            with no_gc():
                root = loader.get_single_node()
                data = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as first:
        raise _broken_yaml(_python_error(text) or first, source, hint, column=column) from None
    except RecursionError:
        raise _deep_error(source, 1, hint) from None
    except (ValueError, OverflowError, TypeError) as exc:
        raise _unreadable_value(_unconstructible(root), source, hint, exc) from None
    return data, root


def _broken_yaml(exc: yaml.YAMLError, source: str, hint: str, *, column: bool) -> InputError:
    """``source:line[:column]: broken YAML: problem``, placed at the error's mark when it has one."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        where = source
    elif column:
        where = f"{source}:{mark.line + 1}:{mark.column + 1}"
    else:
        where = f"{source}:{mark.line + 1}"
    return InputError(f"{where}: broken YAML: {problem}", hint=hint)


def _unreadable_value(node: yaml.ScalarNode | None, source: str, hint: str, exc: Exception) -> InputError:
    """``source:line: cannot read the value 'V': why``, at the scalar that failed (quoted when short)."""
    line = int(node.start_mark.line) + 1 if node is not None else 1
    value = f" {node.value!r}" if node is not None and len(str(node.value)) <= 40 else ""
    return InputError(f"{source}:{line}: cannot read the value{value}: {exc}", hint=hint)


def _python_error(text: str) -> yaml.YAMLError | None:
    """The error PyYAML's own parser reports for ``text`` (libyaml places some marks differently; the
    line users are told stays the same either way)."""
    if _Loader is yaml.SafeLoader:
        return None
    try:
        yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        return exc
    except RecursionError:
        return None
    return None


def _too_deep_indent(text: str) -> int | None:
    """The line whose indentation implies block nesting past :data:`MAX_NESTING` (one level per
    column is the most YAML allows), or None."""
    if len(text) < MAX_NESTING:
        return None
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.lstrip(" -")
        if len(line) - len(stripped) > 2 * MAX_NESTING and stripped:
            return number
    return None


def _unconstructible(root: yaml.Node | None) -> yaml.ScalarNode | None:
    """The first scalar node of ``root`` that SafeLoader cannot construct."""
    if root is None:
        return None
    loader = yaml.SafeLoader("")
    stack: list[yaml.Node] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            try:
                loader.construct_object(node, deep=True)
            except (ValueError, OverflowError, TypeError, yaml.YAMLError):
                return node
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed(node.value))
        elif isinstance(node, yaml.MappingNode):
            for key, value in reversed(node.value):
                stack.extend((value, key))
    return None
