"""Value coercion shared by the convention tables.

Attribute values arrive either structured (lists and dicts decoded from OTLP ``AnyValue``) or as
strings that hold JSON (or, for some vector stores, a Python literal). Every reader goes through
these helpers so each value is decoded at most once and bad data never raises.
"""

from __future__ import annotations

import ast
import json
import math
import re
from datetime import UTC, datetime
from typing import Any

REDACTED = "__REDACTED__"
"""OpenInference's replacement for hidden content."""

# ast.literal_eval is safe from code execution but its cost grows with input; a filter is small.
_LITERAL_MAX = 200_000


def decode(value: Any, *, python_literal: bool = False) -> tuple[Any, bool]:
    """Parse a JSON (or Python-literal) string; pass structured values through. Returns (value, ok)."""
    if not isinstance(value, str):
        return value, True
    text = value.strip()
    if not text:
        return None, True
    try:
        return json.loads(text), True
    except (ValueError, RecursionError):
        pass
    if python_literal and len(text) <= _LITERAL_MAX:
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return value, False
        return _jsonable(parsed)
    return value, False


def _jsonable(value: Any, depth: int = 0) -> tuple[Any, bool]:
    """Turn a Python literal into JSON values (tuples and sets become lists)."""
    if depth > 100:
        return None, False
    if value is None or isinstance(value, str | bool | int):
        return value, True
    if isinstance(value, float):
        return value, math.isfinite(value)
    if isinstance(value, list | tuple | set | frozenset):
        return _jsonable_items(value, depth)
    if isinstance(value, dict):
        return _jsonable_dict(value, depth)
    return None, False


def _jsonable_items(
    value: list[Any] | tuple[Any, ...] | set[Any] | frozenset[Any], depth: int
) -> tuple[Any, bool]:
    items = []
    for item in value:
        converted, ok = _jsonable(item, depth + 1)
        if not ok:
            return None, False
        items.append(converted)
    return items, True


def _jsonable_dict(value: dict[Any, Any], depth: int) -> tuple[Any, bool]:
    """A dict with JSON values under scalar keys (as text, as JSON has them)."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        converted, ok = _jsonable(item, depth + 1)
        if not ok or not isinstance(key, str | int | float | bool):
            return None, False
        out[str(key)] = converted
    return out, True


def maybe_json(value: Any) -> Any:
    """Parse a string only when it looks like a JSON object, array or string; else return it as is."""
    if isinstance(value, str):
        head = value.lstrip()[:1]
        if head in ("{", "[", '"'):
            parsed, ok = decode(value)
            if ok:
                return parsed
    return value


def as_str(value: Any) -> str | None:
    """A scalar as text; None for missing, empty or structured values."""
    if isinstance(value, str):
        return value if value != "" else None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() else str(value)
    return None


def as_float(value: Any) -> float | None:
    """A finite number, from a number or a numeric string."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def as_int(value: Any) -> int | None:
    """An integer, from an int, an integral float or a numeric string."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    number = as_float(value)
    if number is None or not number.is_integer():
        return None
    return int(number)


def as_str_list(value: Any) -> list[str] | None:
    """A list of strings (structured or JSON), or None."""
    parsed = maybe_json(value)
    if isinstance(parsed, list):
        return [s for s in (as_str(item) for item in parsed) if s is not None]
    text = as_str(parsed)
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def nanos_to_datetime(nanos: int) -> datetime | None:
    """Nanoseconds since the epoch as an aware UTC datetime; None for 0 or out of range."""
    if nanos <= 0:
        return None
    try:
        return datetime.fromtimestamp(nanos / 1e9, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def text_of(value: Any, _depth: int = 0) -> str | None:
    """Readable text of a decoded value: strings as is, content parts joined, other values as JSON."""
    if value is None or _depth > 50:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _joined_text(value, _depth + 1)
    inner = _text_field(value) if isinstance(value, dict) else None
    if inner is not None:
        return text_of(inner, _depth + 1)
    return as_str(value) or _json_text(value)


def _joined_text(parts: list[Any], depth: int) -> str | None:
    """The texts of content parts, one per line; None when none has any."""
    texts = [t for t in (text_of(part, depth) for part in parts) if t]
    return "\n".join(texts) if texts else None


def _text_field(value: dict[str, Any]) -> Any:
    """A content part's ``text`` (else ``content``) when it holds text or parts; None if neither does."""
    return next((value[key] for key in ("text", "content") if isinstance(value.get(key), str | list)), None)


def _json_text(value: Any) -> str | None:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return None


# The first dot-separated segment after the first that is an ASCII number (``str.isdigit`` and ``isascii``),
# with the dot after it or the key's end (``\Z``: ``$`` would also match before a final newline).
_INDEX_SEGMENT = re.compile(r"\.([0-9]+)(?:\.|\Z)")
# Keys seen, split: (prefix, index, suffix), or _NOT_INDEXED. The same keys come in every span of a kind
# (``retrieval.documents.0.document.content``): each is searched once (bounded; long keys are not kept).
_NOT_INDEXED = ("", -1, "")
_SPLIT_KEYS: dict[str, tuple[str, int, str]] = {}
_SPLIT_KEYS_MAX = 8192
_SPLIT_KEY_LENGTH = 256


def _split_key(key: str) -> tuple[str, int, str]:
    found = _INDEX_SEGMENT.search(key)
    return _NOT_INDEXED if found is None else (key[: found.start()], int(found.group(1)), key[found.end() :])


def group_indexed(attrs: dict[str, Any]) -> dict[str, dict[int, dict[str, Any]]]:
    """Group flattened keys ``<prefix>.<N>.<suffix>`` by prefix and index, in one pass.

    ``llm.input_messages.0.message.contents.1.message_content.text`` lands in
    ``["llm.input_messages"][0]["message.contents.1.message_content.text"]``; apply again to an
    item for the next level. The index is the first number after the first segment (as a split and a walk
    over the parts finds it); read for most spans of every trace, a key is split once (``_SPLIT_KEYS``).
    """
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for key, value in attrs.items():
        split = _SPLIT_KEYS.get(key)
        if split is None:
            split = _split_key(key)
            if len(key) <= _SPLIT_KEY_LENGTH:
                if len(_SPLIT_KEYS) >= _SPLIT_KEYS_MAX:
                    _SPLIT_KEYS.clear()
                _SPLIT_KEYS[key] = split
        if split is not _NOT_INDEXED:
            prefix, index, suffix = split
            out.setdefault(prefix, {}).setdefault(index, {})[suffix] = value
    return out


def ordered(group: dict[int, dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Items of one indexed group in index order."""
    if not group:
        return []
    return [group[i] for i in sorted(group)]
