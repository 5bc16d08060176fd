"""What the OTLP trace and log decoders share: the abuse limits, reading a protobuf or OTLP/JSON body,
attribute values (protobuf and OTLP/JSON), ids, integers and enums of the JSON mapping, and the capped
list of rejections and warnings.

A private module: its names have no underscore because two sibling modules (``_decode`` for traces,
``_logs`` for log records) use them; nothing outside this package imports it.

Abuse limits (a value is *truncated with a marker*, never rejected, so the span keeps its place in
the trace tree and the truncation is visible to whoever reads the span):

- a structured attribute value nested deeper than ``MAX_ATTRIBUTE_DEPTH`` levels: the part below the
  limit becomes the string ``DEPTH_MARKER``;
- a string attribute longer than ``MAX_VALUE_CHARS`` characters keeps its first ``MAX_VALUE_CHARS``
  characters followed by ``TRUNCATED_MARKER``; a structured value whose strings add up to more than
  that becomes the string ``TRUNCATED_MARKER``.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from tracejudge import InputError

MAX_ATTRIBUTE_DEPTH = 64
"""Deepest nesting of array / key-value-list attribute values kept as structure."""
MAX_VALUE_CHARS = 4 * 1024 * 1024
"""Largest single attribute value kept whole (characters of its strings and bytes)."""
TRUNCATED_MARKER = "…[tracejudge: value truncated]"
DEPTH_MARKER = "[tracejudge: value nested too deeply, truncated]"

MAX_ERRORS = 20
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
ZERO_TRACE = bytes(16)
ZERO_SPAN = bytes(8)
# json.loads turns an escaped lone surrogate (\\udc00) into a str that cannot be encoded as UTF-8
# later (SQLite, PostgreSQL, orjson); only texts that contain such an escape get the scrubbing walk.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


DEFAULT_MAX_SPANS = 50_000
"""Spans (or log records) one request may hold; the SDK's batches hold 512, the Collector's 8192."""
DEFAULT_MAX_DECODED_BYTES = 256 * 1024 * 1024
"""Largest estimated memory a request's decoding may take (see :class:`DecodeLimits`)."""
DEFAULT_MAX_NAME_CHARS = 64 * 1024
"""Longest span, event or scope name and attribute key."""
# What one parsed JSON object (a small dict and its keys) and one array cost in memory, at most, as
# measured on OTLP/JSON with tracemalloc (~340 and ~60 bytes).
JSON_OBJECT_BYTES = 400
JSON_ARRAY_BYTES = 100


@dataclass(frozen=True, slots=True)
class DecodeLimits:
    """Bounds on what decoding one request may make of its bytes (the body limit bounds the bytes).

    A request beyond ``max_spans`` or ``max_decoded_bytes`` is refused whole (HTTP 413) before its
    spans are built; a name or key beyond ``max_name_chars`` is refused whole too (HTTP 400). Each
    refusal names its limit and the option and environment variable that raise it.
    """

    max_spans: int = DEFAULT_MAX_SPANS
    """Spans (``/v1/traces``) or log records (``/v1/logs``) in one request."""
    max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES
    """Estimated memory of the decoded request: for OTLP/JSON, twice the text plus
    ``JSON_OBJECT_BYTES`` per JSON object and ``JSON_ARRAY_BYTES`` per array, checked before
    parsing (a protobuf message parses to a few times its size, which the body limit bounds)."""
    max_name_chars: int = DEFAULT_MAX_NAME_CHARS
    """Characters of a span, event or scope name, an event name of a log record, an attribute key."""


NO_LIMITS = DecodeLimits(max_spans=2**62, max_decoded_bytes=2**62, max_name_chars=2**62)
"""What files are read with: a file is the user's own and may hold any number of spans."""


class OtlpDecodeError(InputError):
    """The payload is not a readable OTLP trace export request."""


class LimitError(OtlpDecodeError):
    """The request is beyond one of the :class:`DecodeLimits` (``status`` is the HTTP answer)."""

    def __init__(self, message: str, *, hint: str, status: int) -> None:
        super().__init__(message, hint=hint)
        self.status = status


def too_many(count: int, limits: DecodeLimits, what: str) -> LimitError:
    return LimitError(
        f"the request holds {count} {what}, more than the limit of {limits.max_spans} per request",
        hint="export smaller batches (BatchSpanProcessor / BatchLogRecordProcessor max_export_batch_size, "
        "the Collector's batch send_batch_max_size) or start the receiver with a larger --max-spans "
        "(env TRACEJUDGE_OTLP_MAX_SPANS)",
        status=413,
    )


def check_name(value: str, limits: DecodeLimits, what: str) -> None:
    """Refuse the request (400) when a name or key is longer than ``limits.max_name_chars``."""
    if len(value) > limits.max_name_chars:
        raise LimitError(
            f"{what} {short(value)} is {len(value)} characters long, more than the limit of "
            f"{limits.max_name_chars}",
            hint="keep names and attribute keys short (values may be long) or start the receiver with a "
            "larger --max-name-chars (env TRACEJUDGE_OTLP_MAX_NAME_CHARS)",
            status=400,
        )


def count_json(obj: Any, *path: tuple[str, ...]) -> int:
    """How many items the nested lists at ``path`` (each step: its camelCase and snake_case keys) hold,
    counted before any is decoded; entries of the wrong type count as nothing (decoding reports them)."""
    level: list[Any] = [obj]
    for i, keys in enumerate(path):
        found: list[Any] = []
        for d in level:
            if isinstance(d, dict):
                v = next((d[k] for k in keys if d.get(k) is not None), None)
                if isinstance(v, list):
                    if i == len(path) - 1:
                        found.append(len(v))
                    else:
                        found.extend(v)
        level = found
    return sum(level)


def check_json_size(
    chars: int, objects: int, arrays: int, limits: DecodeLimits, *, least: bool = False
) -> None:
    """Refuse (413) an OTLP/JSON text of ``chars`` characters, ``objects`` ``{`` and ``arrays`` ``[``
    whose parse would take more than ``limits.max_decoded_bytes``, before parsing it: every ``{`` or
    ``[`` may open an object or array (a few inside strings count too). ``least``: ``chars`` is a
    lower bound of the text's length (so is the estimate)."""
    estimate = 2 * chars + JSON_OBJECT_BYTES * objects + JSON_ARRAY_BYTES * arrays
    if estimate > limits.max_decoded_bytes:
        raise LimitError(
            f"decoding the request would take {'at least' if least else 'about'} {estimate} bytes, more "
            f"than the limit of {limits.max_decoded_bytes} (its {objects} JSON objects)",
            hint="export smaller batches, send protobuf (application/x-protobuf), or start the receiver "
            "with a larger --max-decoded-bytes (env TRACEJUDGE_OTLP_MAX_DECODED_BYTES)",
            status=413,
        )


class SpanError(Exception):
    """A span cannot be used; it is rejected and the rest of the request is kept."""


class TooBig(Exception):
    """A structured value exceeds the size budget."""


class Notes:
    """Rejections and warnings, capped so a request of a million bad spans stays small."""

    __slots__ = ("dropped", "limits", "lines", "rejected")

    def __init__(self, limits: DecodeLimits | None = None) -> None:
        self.lines: list[str] = []
        self.dropped = 0
        self.rejected = 0
        self.limits = limits or NO_LIMITS

    def add(self, line: str) -> None:
        if len(self.lines) < MAX_ERRORS:
            self.lines.append(line)
        else:
            self.dropped += 1

    @property
    def count(self) -> int:
        """Lines added so far, kept or dropped."""
        return len(self.lines) + self.dropped

    def reject(self, where: str, why: str) -> None:
        self.rejected += 1
        self.add(f"rejected {where}: {why}")

    @property
    def errors(self) -> list[str]:
        """The lines kept, and a count of those dropped."""
        if self.dropped:
            return [*self.lines, f"… and {self.dropped} more"]
        return list(self.lines)


class Budget:
    __slots__ = ("deep", "remaining")

    def __init__(self) -> None:
        self.remaining = MAX_VALUE_CHARS
        self.deep = False


def short(value: object, n: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 1] + "…"


def deep_note(label: str, key: str) -> str:
    return f"{label}: attribute {short(key)} nested deeper than {MAX_ATTRIBUTE_DEPTH} levels, truncated"


def truncate(s: str) -> str:
    return s[:MAX_VALUE_CHARS] + TRUNCATED_MARKER


def parse_pb(message: Any, body: bytes, *, hint: str) -> Any:
    """``message`` parsed from ``body``, or an :class:`OtlpDecodeError` naming the message type."""
    try:
        message.ParseFromString(body)
    except Exception as exc:  # the protobuf runtime raises DecodeError, and others on odd input
        raise OtlpDecodeError(
            f"the body is not a valid OTLP {type(message).__name__} protobuf ({exc})", hint=hint
        ) from exc
    return message


def json_text(body: bytes) -> str:
    """The text of a JSON body, every string of which can be written as UTF-8.

    The one way bytes become JSON text here: the encoding is detected as ``json.loads`` does (UTF-8,
    or UTF-16/32 by their byte patterns) and bytes that are not valid in it — a raw lone surrogate
    (``\\xed\\xa0\\x80``), a stray ``\\xff`` — become U+FFFD. (``json.loads`` on bytes decodes with
    ``surrogatepass``, which lets a raw surrogate through to fail later, in the store.)
    """
    return body.decode(json.detect_encoding(body), "replace")


def fix_text(s: str) -> str:
    """``s`` with each lone surrogate replaced by U+FFFD."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return s


def load_json_body(body: bytes, *, request: str, limits: DecodeLimits | None = None) -> Any:
    """Parse an OTLP/JSON body, mapping every failure to an :class:`OtlpDecodeError`; a lone surrogate,
    raw or escaped, and bytes that are not UTF-8 become U+FFFD rather than fatal (see :func:`json_text`).
    With ``limits``, a body whose parse would be too large is refused first (:func:`check_json_size`)."""
    counts = None
    if limits is not None and json.detect_encoding(body).startswith("utf-8"):
        # In UTF-8 the brackets counted in the bytes are the text's (no multi-byte character holds
        # those bytes, a byte replaced by U+FFFD is none of them), and the text has as many characters
        # as bytes when they are ASCII, never fewer than a quarter as many: a body too large even so
        # is refused before its text is made (beside the bytes, it doubled a gzip bomb's peak).
        counts = body.count(b"{"), body.count(b"[")
        ascii_only = body.isascii()
        check_json_size(len(body) if ascii_only else len(body) // 4, *counts, limits, least=not ascii_only)
    text = json_text(body)
    if limits is not None:
        check_json_size(len(text), *(counts or (text.count("{"), text.count("["))), limits)
    try:
        obj = json.loads(text)
    except RecursionError as exc:
        raise OtlpDecodeError(
            "the JSON body is nested too deeply to read",
            hint=f"keep attribute values under {MAX_ATTRIBUTE_DEPTH} levels of nesting",
        ) from exc
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise OtlpDecodeError(
            f"the body is not valid JSON ({exc})",
            hint=f"send OTLP/JSON (an {request} object), UTF-8 encoded; "
            "a truncated body or a protobuf body sent as application/json cause this",
        ) from exc
    return scrub(obj) if SURROGATE_ESCAPE.search(text) else obj


def attrs_pb(kvs: Iterable[Any], notes: Notes, label: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    max_key = notes.limits.max_name_chars
    for kv in kvs:
        if len(kv.key) > max_key:
            check_name(kv.key, notes.limits, f"{label}: attribute key")
        v = kv.value
        kind = v.WhichOneof("value")
        if kind == "string_value":
            s = v.string_value
            if len(s) > MAX_VALUE_CHARS:
                notes.add(
                    f"{label}: attribute {short(kv.key)} longer than {MAX_VALUE_CHARS} characters, truncated"
                )
                s = truncate(s)
            out[kv.key] = s
        elif kind in _PB_SCALARS:
            out[kv.key] = getattr(v, kind)
        else:
            out[kv.key] = _other_pb(v, kind, notes, label, kv.key)
    return out


_PB_SCALARS = frozenset({"int_value", "double_value", "bool_value"})


def _other_pb(v: Any, kind: str | None, notes: Notes, label: str, key: str) -> Any:
    """A top-level attribute value that is structured, bytes or unset, truncated past the limits."""
    if kind == "array_value" or kind == "kvlist_value":
        return _bounded(lambda budget: value_pb(v, kind, 1, budget), notes, label, key)
    return scalar_pb(v, kind, notes, label, key)


def _bounded(read: Callable[[Budget], Any], notes: Notes, label: str, key: str) -> Any:
    """A structured value read within one budget: the truncation marker past the size limit, a note
    when it is cut below the depth limit (both said once, for the attribute ``key``)."""
    budget = Budget()
    try:
        value = read(budget)
    except TooBig:
        notes.add(f"{label}: attribute {short(key)} larger than {MAX_VALUE_CHARS} characters, truncated")
        return TRUNCATED_MARKER
    if budget.deep:
        notes.add(deep_note(label, key))
    return value


def scalar_pb(v: Any, kind: str | None, notes: Notes, label: str, key: str) -> Any:
    if kind in _PB_SCALARS:
        return getattr(v, kind)
    if kind == "bytes_value":
        raw = v.bytes_value
        if len(raw) > MAX_VALUE_CHARS:
            notes.add(f"{label}: attribute {short(key)} longer than {MAX_VALUE_CHARS} bytes, truncated")
            return TRUNCATED_MARKER
        return base64.b64encode(raw).decode("ascii")
    # Unset values, and string_value_strindex (an index into a dictionary that only profiles carry).
    return None


def value_pb(v: Any, kind: str | None, depth: int, budget: Budget) -> Any:
    """A value inside a structured attribute, spending its strings and bytes from ``budget``."""
    if kind in _PB_SCALARS:
        return getattr(v, kind)
    convert = _PB_KINDS.get(kind)  # type: ignore[arg-type]
    return None if convert is None else convert(v, depth, budget)


def _string_pb(v: Any, _depth: int, budget: Budget) -> str:
    return _spend(v.string_value, budget)


def _bytes_pb(v: Any, _depth: int, budget: Budget) -> str:
    budget.remaining -= len(v.bytes_value)
    if budget.remaining < 0:
        raise TooBig
    return base64.b64encode(v.bytes_value).decode("ascii")


def _array_pb(v: Any, depth: int, budget: Budget) -> Any:
    if depth > MAX_ATTRIBUTE_DEPTH:
        budget.deep = True
        return DEPTH_MARKER
    return [value_pb(x, x.WhichOneof("value"), depth + 1, budget) for x in v.array_value.values]


def _kvlist_pb(v: Any, depth: int, budget: Budget) -> Any:
    if depth > MAX_ATTRIBUTE_DEPTH:
        budget.deep = True
        return DEPTH_MARKER
    out: dict[str, Any] = {}
    for kv in v.kvlist_value.values:
        budget.remaining -= len(kv.key)
        x = kv.value
        out[kv.key] = value_pb(x, x.WhichOneof("value"), depth + 1, budget)
    return out


_PB_KINDS: dict[str, Callable[[Any, int, Budget], Any]] = {
    "string_value": _string_pb,
    "bytes_value": _bytes_pb,
    "array_value": _array_pb,
    "kvlist_value": _kvlist_pb,
}


def get(d: dict[str, Any], camel: str, snake: str) -> Any:
    v = d.get(camel)
    if v is None and snake != camel:
        v = d.get(snake)
    return v


def id_json(value: Any, nbytes: int, what: str) -> bytes:
    if not isinstance(value, str):
        raise SpanError(f"{what} must be a hex string, got {type(value).__name__}")
    # Some producers send proto3-JSON base64 ids; their length tells them apart from hex.
    raw = _hex_id(value, nbytes) or _base64_id(value, nbytes)
    if raw is None:
        raise SpanError(f"{what} must be {2 * nbytes} hex characters, got {short(value)}")
    return raw


def _hex_id(value: str, nbytes: int) -> bytes | None:
    if len(value) != 2 * nbytes:
        return None
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        return None
    return raw if len(raw) == nbytes else None  # fromhex skips whitespace


def _base64_id(value: str, nbytes: int) -> bytes | None:
    if not value:
        return None
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == nbytes else None


def int64_json(value: Any, what: str, *, unsigned: bool = False) -> int:
    if value is None:
        return 0
    n = _integer(value, what)
    if n > INT64_MAX or n < (0 if unsigned else INT64_MIN):
        raise SpanError(f"{what} out of range: {short(value)}")
    return n


def _integer(value: Any, what: str) -> int:
    """An integer of the JSON mapping: a number, a decimal string, or a float with no fraction."""
    if isinstance(value, bool):
        raise SpanError(f"{what} must be an integer, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and 0 < len(value) <= 21:
        try:
            return int(value, 10)
        except ValueError:
            raise SpanError(f"{what} must be a decimal integer, got {short(value)}") from None
    if isinstance(value, float) and value.is_integer() and math.isfinite(value):
        return int(value)
    raise SpanError(f"{what} must be an integer, got {short(value)}")


def enum_json(value: Any, names: dict[str, int], what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31:
        return value
    if isinstance(value, str) and value in names:
        return names[value]
    raise SpanError(f"{what} must be an integer enum value, got {short(value)}")


def str_json(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SpanError(f"{what} must be a string, got {type(value).__name__}")
    return value


def attrs_json(kvs: Any, notes: Notes, label: str) -> dict[str, Any]:
    if kvs is None:
        return {}
    if not isinstance(kvs, list):
        raise SpanError("attributes must be a list of {key, value} objects")
    out: dict[str, Any] = {}
    for kv in kvs:
        if not isinstance(kv, dict):
            raise SpanError("each attribute must be a {key, value} object")
        key = kv.get("key", "")  # proto3 JSON omits an empty key
        if not isinstance(key, str):
            raise SpanError(f"attribute key must be a string, got {short(key)}")
        if len(key) > notes.limits.max_name_chars:
            check_name(key, notes.limits, f"{label}: attribute key")
        out[key] = _attr_value_json(kv.get("value"), notes, label, key)
    return out


def _attr_value_json(v: Any, notes: Notes, label: str, key: str) -> Any:
    """A top-level attribute's AnyValue, truncated past the limits (each truncation noted)."""
    if v is None:
        return None
    if not isinstance(v, dict):
        raise SpanError(f"attribute {short(key)}: value must be an AnyValue object")
    s = v.get("stringValue")
    if isinstance(s, str):
        if len(s) > MAX_VALUE_CHARS:
            notes.add(f"{label}: attribute {short(key)} longer than {MAX_VALUE_CHARS} characters, truncated")
            return truncate(s)
        return s
    return _bounded(lambda budget: value_json(v, 1, budget, key), notes, label, key)


def value_json(v: Any, depth: int, budget: Budget, key: str) -> Any:
    if not isinstance(v, dict):
        raise SpanError(f"attribute {short(key)}: value must be an AnyValue object")
    # The first kind present decides, in _KINDS order; JSON encoders write camelCase or snake_case.
    for kind in _KINDS:
        x = v.get(kind.camel, v.get(kind.snake))
        if x is None:
            continue
        if kind.nested and depth > MAX_ATTRIBUTE_DEPTH:
            budget.deep = True
            return DEPTH_MARKER
        return kind.convert(x, depth, budget, key)
    # An empty AnyValue is null; unknown value kinds (newer OTLP) are ignored like unknown fields.
    return None


def _spend(text: str, budget: Budget) -> str:
    budget.remaining -= len(text)
    if budget.remaining < 0:
        raise TooBig
    return text


def _string_json(s: Any, _depth: int, budget: Budget, key: str) -> str:
    if not isinstance(s, str):
        raise SpanError(f"attribute {short(key)}: stringValue must be a string")
    return _spend(s, budget)


def _bool_json(b: Any, _depth: int, _budget: Budget, key: str) -> bool:
    if not isinstance(b, bool):
        raise SpanError(f"attribute {short(key)}: boolValue must be true or false")
    return b


def _int_json(i: Any, _depth: int, _budget: Budget, key: str) -> int:
    return int64_json(i, f"attribute {short(key)}: intValue")


def _double_json(d: Any, _depth: int, _budget: Budget, key: str) -> float:
    return double_json(d, key)


def _values(container: Any, key: str) -> list[Any]:
    if not isinstance(container, dict):
        raise SpanError(f"attribute {short(key)}: arrayValue/kvlistValue must be an object")
    values = container.get("values") or []
    if not isinstance(values, list):
        raise SpanError(f"attribute {short(key)}: values must be a list")
    return values


def _array_json(arr: Any, depth: int, budget: Budget, key: str) -> list[Any]:
    return [value_json(x, depth + 1, budget, key) for x in _values(arr, key)]


def _kvlist_json(kvl: Any, depth: int, budget: Budget, key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in _values(kvl, key):
        if not isinstance(kv, dict) or not isinstance(k := kv.get("key", ""), str):
            raise SpanError(f"attribute {short(key)}: kvlistValue entries must be {{key, value}} objects")
        budget.remaining -= len(k)
        inner = kv.get("value")
        out[k] = None if inner is None else value_json(inner, depth + 1, budget, key)
    return out


def _bytes_json(by: Any, _depth: int, budget: Budget, key: str) -> str:
    if not isinstance(by, str):
        raise SpanError(f"attribute {short(key)}: bytesValue must be a base64 string")
    return _spend(by, budget)


class _Kind(NamedTuple):
    """One AnyValue kind: its field in camelCase and snake_case, how it converts, whether it nests."""

    camel: str
    snake: str
    convert: Callable[[Any, int, Budget, str], Any]
    nested: bool = False


_KINDS = (
    _Kind("stringValue", "string_value", _string_json),
    _Kind("boolValue", "bool_value", _bool_json),
    _Kind("intValue", "int_value", _int_json),
    _Kind("doubleValue", "double_value", _double_json),
    _Kind("arrayValue", "array_value", _array_json, nested=True),
    _Kind("kvlistValue", "kvlist_value", _kvlist_json, nested=True),
    _Kind("bytesValue", "bytes_value", _bytes_json),
)


def double_json(d: Any, key: str) -> float:
    if isinstance(d, bool):
        raise SpanError(f"attribute {short(key)}: doubleValue must be a number")
    if isinstance(d, int | float):
        return float(d)
    if isinstance(d, str) and len(d) <= 64:
        try:
            return float(d)
        except ValueError:
            pass
    raise SpanError(f"attribute {short(key)}: doubleValue must be a number, got {short(d)}")


def scrub(obj: Any) -> Any:
    """Replace lone surrogates in every string and key by U+FFFD (iteratively: the input may be deep)."""
    fix = fix_text

    root: list[Any] = [obj]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        container, idx = stack.pop()
        value = container[idx]
        if isinstance(value, str):
            container[idx] = fix(value)
        elif isinstance(value, list):
            stack.extend((value, i) for i in range(len(value)))
        elif isinstance(value, dict):
            fixed = {fix(k): v for k, v in value.items()}
            container[idx] = fixed
            stack.extend((fixed, k) for k in fixed)
    return root[0]
