"""Replay a recorded retrieval filter against a document's metadata, in three-valued logic.

Filters are equality maps (``{"region": "EU"}``) or ``$``-operators (``$eq $ne $in $nin $gt $gte
$lt $lte $and $or $not``), as Chroma, Pinecone and MongoDB write them. The answer is True (the
document passes), False (the filter excludes it) or None (the metadata or the filter does not
settle it: a key the manifest does not record, an operator we do not know, a value we cannot
compare). None is never turned into a guess.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from functools import partial
from typing import Any

__all__ = ["evaluate_filter", "filter_keys"]


def _and(values: list[bool | None]) -> bool | None:
    if any(v is False for v in values):
        return False
    return True if all(v is True for v in values) else None


def _or(values: list[bool | None]) -> bool | None:
    if any(v is True for v in values):
        return True
    return False if all(v is False for v in values) else None


def _not(value: bool | None) -> bool | None:
    return None if value is None else not value


def _as_number(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    if isinstance(value, str):
        try:
            return Decimal(value.strip())
        except InvalidOperation:
            return None
    return None


def _as_instant(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str) and len(value) >= 10 and value[4:5] == "-":
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def _comparable(a: Any, b: Any) -> tuple[Any, Any] | None:
    """Both values in one comparable kind: numbers (numeric strings count), instants, strings, booleans."""
    if isinstance(a, bool) or isinstance(b, bool):
        return (a, b) if isinstance(a, bool) and isinstance(b, bool) else None
    if isinstance(a, int | float) or isinstance(b, int | float):
        return _both(_as_number(a), _as_number(b))
    instants = _both(_as_instant(a), _as_instant(b))
    if instants is not None:
        return instants
    if isinstance(a, str) and isinstance(b, str):
        return a, b
    return None


def _both(a: Any, b: Any) -> tuple[Any, Any] | None:
    """The pair when both values converted (neither is None)."""
    return (a, b) if a is not None and b is not None else None


def _equal(actual: Any, expected: Any) -> bool | None:
    if isinstance(actual, list):
        # A list-valued field (tags) matches when it holds the value, as vector stores do.
        return _or([_equal(item, expected) for item in actual]) if actual else False
    pair = _comparable(actual, expected)
    if pair is None:
        return False if type(actual) is type(expected) or actual is None or expected is None else None
    return bool(pair[0] == pair[1])


def _not_equal(actual: Any, expected: Any) -> bool | None:
    return _not(_equal(actual, expected))


def _in(actual: Any, expected: Any) -> bool | None:
    if not isinstance(expected, list):
        return None
    return _or([_equal(actual, item) for item in expected]) if expected else False


def _not_in(actual: Any, expected: Any) -> bool | None:
    return _not(_in(actual, expected))


def _order(actual: Any, expected: Any, test: Callable[[Any, Any], Any]) -> bool | None:
    pair = _comparable(actual, expected)
    if pair is None or isinstance(pair[0], bool):
        return None
    return bool(test(*pair))


# The comparison operators, each (actual value, the filter's value) -> True, False or None.
_COMPARE: dict[str, Callable[[Any, Any], bool | None]] = {
    "$eq": _equal,
    "$ne": _not_equal,
    "$in": _in,
    "$nin": _not_in,
    "$gt": partial(_order, test=operator.gt),
    "$gte": partial(_order, test=operator.ge),
    "$lt": partial(_order, test=operator.lt),
    "$lte": partial(_order, test=operator.le),
}


def _field(actual: Any, present: bool, cond: Any) -> bool | None:
    if isinstance(cond, Mapping) and cond and all(str(k).startswith("$") for k in cond):
        return _and([_operator(actual, present, str(op), arg) for op, arg in cond.items()])
    if isinstance(cond, list | Mapping):
        return None  # a list or object as an equality value: stores disagree on what it means
    return _operator(actual, present, "$eq", cond)


def _operator(actual: Any, present: bool, op: str, arg: Any) -> bool | None:
    if op == "$not":
        return _not(_field(actual, present, arg))
    compare = _COMPARE.get(op)
    if compare is None or not present:
        # Not present: stores differ on missing keys; the manifest may simply not record this one.
        return None
    return compare(actual, arg)


def evaluate_filter(flt: Any, metadata: Mapping[str, Any]) -> bool | None:
    """Does a document with ``metadata`` pass ``flt``? True, False, or None when it cannot be told."""
    if flt is None:
        return True
    if not isinstance(flt, Mapping):
        return None  # e.g. a Milvus expression string: not replayable here
    results: list[bool | None] = []
    for key, cond in flt.items():
        key = str(key)
        if key in ("$and", "$or"):
            if not isinstance(cond, list):
                results.append(None)
                continue
            parts = [evaluate_filter(c, metadata) for c in cond]
            results.append(_and(parts) if key == "$and" else _or(parts))
        elif key == "$not":
            results.append(_not(evaluate_filter(cond, metadata)))
        elif key.startswith("$"):
            results.append(None)
        else:
            results.append(_field(metadata.get(key), key in metadata, cond))
    return _and(results)


def filter_keys(flt: Any) -> list[str]:
    """Metadata keys a filter reads, in first-seen order."""
    keys: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                k = str(k)
                if k.startswith("$"):
                    walk(v)
                elif k not in keys:
                    keys.append(k)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(flt)
    return keys
