"""Values an exporter may have cut short, and records an SDK dropped at its limits.

Exporters and backends cap attribute values (the SDKs' ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``, a
collector's truncate processor, a backend's column) and mark nothing: the value simply ends at the limit.
A model input cut that way no longer holds the clause it was sent with, and reading it as whole would
conclude ``dropped_in_context`` from a record of less than the model saw (DESIGN 5.5). Four signs are
read (:func:`cut_short` the first three, :func:`cut_values` all four): a JSON document (or Python literal)
that stops before it closes; a text that stops mid-sentence exactly as long as a limit such caps use
(``LIMITS``); one exactly as long as the limit the trace itself shows (:func:`shown_limits`: the length its
longest values share, where a limit set at 250 or 333 left them); and a text another value of the same span
holds longer while no value records it whole (:class:`_Held`: one key cut on the way, the request it was sent
in whole).
"""

from __future__ import annotations

import ast
import bisect
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from tracejudge.schema import RawSpan

# Lengths exporters and backends are set to cut at: powers of two (with one less, for limits that count a
# terminator) and round figures — OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT is whatever a user sets, 300 or 1500 as
# often as 1000. A text exactly this long may have been longer.
LIMITS = frozenset(
    {
        *(2**n for n in range(7, 17)),
        *(2**n - 1 for n in range(7, 17)),
        *(n * 100 for n in range(2, 1001)),
    }
)
# How a whole text ends (a sentence, a list, a quote, a markup block).
_ENDINGS = tuple(".!?;:)]}>\"'`*")
# A JSON document's opening (an object's first key, an array of objects, strings or arrays), and a
# Python literal's (a repr some instrumentations record): a prompt may start with "[INST]", "{name}" or
# DSPy's "[[ ## context ## ]]" and be neither.
_JSON_START = re.compile(r'\s*(\{\s*"|\[\s*(\{\s*"|"|\[\s*[\[{"]))')
_LITERAL_START = re.compile(r"\s*(\{\s*'|\[\s*(\{\s*'|'|\(\s*'))")
# The first characters a JSON document or a Python literal opens with (after blanks).
_OPENINGS = frozenset("{[(")


def _closes(value: str, json_like: bool) -> bool:
    """Whether a value that opens like JSON (``json_like``) or a Python literal closes as one."""
    if json_like:
        try:
            json.loads(value)
        except (ValueError, RecursionError):
            return False
        return True
    try:
        ast.literal_eval(value.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def cut_short(value: str, shown: frozenset[int] = frozenset()) -> str | None:
    """Why ``value`` may have been cut short; None when nothing says so. ``shown``: the lengths the trace's
    values show they were cut at (:func:`shown_limits`, ``TaskRecord.cut_lengths``)."""
    # Most values open with a letter: neither pattern is tried on them.
    opens = value[:1] in _OPENINGS or value[:1].isspace()
    json_like = opens and _JSON_START.match(value) is not None
    if json_like or (opens and _LITERAL_START.match(value)):
        # A Python-looking value that ends on a closing bracket and still does not parse is a repr that is
        # no literal ("<… object at 0x…>" inside), not a cut: a cut seldom lands just there.
        whole = not json_like and value.rstrip().endswith(("]", "}", ")"))
        if whole or _closes(value, json_like):
            return None
        return f"a JSON (or Python) value that stops at {len(value)} characters before it closes"
    # A text exactly as long as a limit that stops mid-sentence. Ids and hashes hit round lengths too (a
    # SHA-512 is 128 hex digits): only text with words counts.
    if " " not in value or value.rstrip().endswith(_ENDINGS):
        return None
    if len(value) in LIMITS:
        return (
            f"text exactly {len(value)} characters long that stops mid-sentence, where exporters cut values"
        )
    if len(value) in shown:
        return (
            f"text exactly {len(value)} characters long that stops mid-sentence, the length the trace's"
            " longest values share (where its exporter cut them)"
        )
    return None


# A length limit below this is no limit anyone sets for texts: the longest values of a span with ids alone
# (two UUIDs, two hashes) share their length without having been cut.
_LEAST_LIMIT = 64
# (process, event attributes?) -> the longest length of its values and the different texts that have it.
_Longest = dict[tuple[str, bool], tuple[int, set[str]]]


def shown_limits(spans: Iterable[RawSpan]) -> frozenset[int]:
    """The lengths these spans show their values were cut at. An SDK cuts every attribute value longer than
    its limit (``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``, or ``OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT`` for span
    attributes and the general one for event attributes) to exactly that length and marks nothing, so where it
    cut, the longest values of its spans are all as long as the limit. Per process (the spans' resource) and
    per record kind (span attributes, event attributes), the longest length is read as the limit when a value
    that has it opens like JSON (or a Python literal) and stops on no closing bracket, or when two different
    texts have it: whole values rarely share the longest length exactly (two records of one message list
    do, each closing as JSON: such values do not count), nor does a whole JSON document stop open. Where only
    one value was longer than the limit and it is plain text, nothing shows the limit (a limit set to a round
    figure is read from the length alone: ``LIMITS``)."""
    longest: _Longest = {}
    resource: dict[str, Any] | None = None
    process = ""
    for span in spans:
        if span.resource is not resource and span.resource != resource:  # a trace's spans mostly share one
            resource, process = span.resource, repr(sorted(span.resource.items()))
        _longest_of(longest, (process, False), span.attributes.values())
        for event in span.events:
            _longest_of(longest, (process, True), event.attributes.values())
    return frozenset(
        length for length, values in longest.values() if length >= _LEAST_LIMIT and _shows(values)
    )


def _shows(values: set[str]) -> bool:
    """Whether the different values of one length, the longest, show they were cut at it: one JSON (or
    Python-literal) document that stops open, or two texts that are not whole documents."""
    texts = 0
    for value in values:
        if _JSON_START.match(value) is None and _LITERAL_START.match(value) is None:
            texts += 1
        elif not value.rstrip().endswith(("]", "}", ")")):
            return True  # a document cut short (one whose cut lands on a closing bracket is not told apart)
    return texts > 1


def _longest_of(longest: _Longest, key: tuple[str, bool], values: Iterable[Any]) -> None:
    """Fold ``values`` (attribute values: texts, lists of them) into ``longest[key]``: the longest length seen
    and the different texts that have it."""
    # Values shorter than any limit are passed over: a longest length below it shows none.
    length, texts = longest.get(key, (_LEAST_LIMIT, set()))
    for value in values:
        if isinstance(value, str):
            if len(value) < length:
                continue
            if len(value) > length:
                length, texts = len(value), set()
            texts.add(value)
        elif isinstance(value, list):
            for text in _strings(value):
                if len(text) >= length:
                    if len(text) > length:
                        length, texts = len(text), set()
                    texts.add(text)
    longest[key] = (length, texts)


def _strings(values: list[Any]) -> Iterator[str]:
    """The texts of a (nested) list value."""
    for item in values:
        if isinstance(item, str):
            yield item
        elif isinstance(item, list):
            yield from _strings(item)


def cut_values(
    span: RawSpan, parsed: Mapping[int, tuple[str, Any]] | None = None, shown: frozenset[int] = frozenset()
) -> list[str]:
    """A note for each attribute of the span (its events' included) whose value may have been cut.
    ``parsed``: texts a reader already parsed as JSON, by ``id``, with what they decode to
    (``SpanView.parsed``) — each closes, and its strings are read from it, so it is not parsed again (a model
    call's messages are most of a trace's bytes); ``shown``: the lengths the trace shows its values were cut
    at (:func:`shown_limits`)."""
    known = parsed or {}
    items = list(span.attributes.items())
    if span.events:
        items += [(f"{e.name} {key}", value) for e in span.events for key, value in e.attributes.items()]
    notes = []
    held: _Held | None = None  # built for the first text that may be held longer (most spans have none)
    for key, value in items:
        if isinstance(value, str):
            why = _cut_text(value, known, shown)
        elif isinstance(value, list):
            why = _cut_list(value, known, shown)
        else:
            continue  # a number or a boolean: never cut
        if why is None:
            for text in (value,) if isinstance(value, str) else _strings(value):
                if not _may_be_held_longer(text, shown):
                    continue
                held = held if held is not None else _Held(items, known)
                why = held.longer(text)
                if why is not None:
                    break
        if why is not None:
            notes.append(f"{key}: {why}")
    return notes


def _may_be_held_longer(text: str, shown: frozenset[int]) -> bool:
    """Whether :class:`_Held` reads ``text``: a text with words, at least ``_LEAST_LIMIT`` long, no JSON
    document (one that parses is whole, one that does not is :func:`cut_short`'s), stopping mid-sentence —
    or at any end when its length is a limit's (``LIMITS``, or ``shown``)."""
    return (
        len(text) >= _LEAST_LIMIT
        and " " in text
        and _JSON_START.match(text) is None
        and (not text.rstrip().endswith(_ENDINGS) or len(text) in LIMITS or len(text) in shown)
    )


# A text's last characters, by which the texts a value records whole are indexed (``_Recorded``).
_TAIL = _LEAST_LIMIT // 2
# Characters a text keeps as they are in all its forms (no quote, backslash, control or non-ASCII character,
# which JSON or a repr escapes): its opening run of them is searched once for all.
_PLAIN = re.compile(r"[ !#-&(-\[\]-~]*")


class _Held:
    """A text that reads whole was cut on the way when another value of its span holds it longer.

    A limit on one key (a backend's column, a collector's truncate processor) cuts that value and leaves the
    span's others whole: an OpenInference message's content (``llm.input_messages.N.message.content``) cut
    while the request it was sent in (``input.value``) holds it — as it is (a Bedrock agent's prompt), as a
    JSON string (Atomic Agents, LiteLLM) or as a Python repr, alone or inside JSON (CrewAI; Haystack,
    LlamaIndex) —, TruLens' arguments beside the call's echo. So a text is read as cut when another value of
    the span holds it in one of those forms (at its start or inside it), and no value records it whole: none
    has a string — the value itself, a string of its JSON document, a string literal of a repr
    (:func:`_texts`) — that is the text or ends with it. A quote after the text where a longer value holds
    it is no sign: the text cut right before a quote of its own (``it's``, ``"quoted", he said``) is followed
    there by that quote (escaped in JSON) and whatever followed it.

    The texts read (:func:`_may_be_held_longer`) stop mid-sentence, at any length; one that ends a sentence
    only when its length is a limit — one exporters cut at (``LIMITS``) or the trace shows (``shown``,
    ``TaskRecord.cut_lengths``): a cut there lands where a sentence ends often enough (a Bedrock agent's
    prompt cut at 128 characters did), while at any other length a whole message that opens a longer text (a
    system prompt, the first sentences of a request) reads as what it is.

    A value's strings are read once, for the first text it holds (a model span's request holds every message
    of it), and indexed by their last characters: whether one records a text whole is a lookup."""

    def __init__(self, items: list[tuple[str, Any]], known: Mapping[int, tuple[str, Any]]) -> None:
        # Only a value longer than a text read can hold it: the longest first, each with its place (a note
        # names the first that holds the text).
        self.values = sorted(
            (
                (place, key, value)
                for place, (key, value) in enumerate(items)
                if isinstance(value, str) and len(value) > _LEAST_LIMIT
            ),
            key=lambda item: -len(item[2]),
        )
        self._lengths = [-len(value) for _, _, value in self.values]  # ascending, for bisect
        self._known = known
        self._recorded: dict[int, dict[str, list[str]]] = {}

    def longer(self, text: str) -> str | None:
        """Why ``text`` may have been cut (another value holds it longer), None when nothing says so."""
        count = bisect.bisect_left(self._lengths, -len(text))
        if not count:
            return None
        values = self.values[:count]
        forms = list(_forms(text))
        longer = next((key for _, key, value in sorted(values) if _holds(value, text, forms)), None)
        if longer is None or any(self._whole(i, text) for i in range(count)):
            return None
        if text.rstrip().endswith(_ENDINGS):
            return (
                f"text exactly {len(text)} characters long, a limit's length, where {longer} of the same span"
                " holds it longer (cut on the way)"
            )
        return (
            f"text that stops mid-sentence where {longer} of the same span holds it longer (cut on the way)"
        )

    def _whole(self, i: int, text: str) -> bool:
        """Whether ``values[i]`` records ``text`` whole: one of its strings is the text or ends with it."""
        recorded = self._recorded.get(i)
        if recorded is None:
            value = self.values[i][2]
            known = self._known.get(id(value))
            parsed = known[1] if known is not None and known[0] is value else _MISSING
            recorded = self._recorded[i] = _by_tail(_texts(value, parsed))
        return any(string.endswith(text) for string in recorded.get(text[-_TAIL:], ()))


# A value not parsed yet (None is JSON's null).
_MISSING: Any = object()
# How deep texts inside texts are read (a repr inside a JSON string inside a JSON string).
_DEPTH = 3
# A text that may be a Python repr: an object's (``ChatMessage(role=...``, ``<ChatRole.USER: 'user'>``,
# pydantic's str ``content='...' role='user'``) or a container's. Only such a text is read for string
# literals: in other text a quote is just a quote.
_REPR_START = re.compile(r"\s*(?:[\[({<]|[A-Za-z_][\w.]*[(=])")
# A Python string literal as a repr writes one (one quote kind, escapes, on one line), where a repr's syntax
# may follow it: a separator or a container's close (blank for pydantic's str), or the end.
_REPR_STRING = re.compile(r"""[bruBRU]{0,2}('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")(?=[\s,)\]}:>]|\Z)""")


def _texts(value: str, parsed: Any = _MISSING, depth: int = 0) -> Iterator[str]:
    """The strings ``value`` records whole, at least ``_LEAST_LIMIT`` long: itself, the strings of the JSON
    document it is (``parsed`` when a reader parsed it already), the string literals of the repr it is —
    and so on inside those, ``_DEPTH`` levels deep."""
    if len(value) < _LEAST_LIMIT:
        return
    yield value
    if depth >= _DEPTH:
        return
    if parsed is _MISSING:
        parsed = _json_or_missing(value)
    if parsed is not _MISSING:
        for string in _strings_of(parsed):
            yield from _texts(string, _MISSING, depth + 1)
    elif _REPR_START.match(value):
        for literal in _REPR_STRING.finditer(value):
            inside = _literal(literal)
            if inside is not None:
                yield from _texts(inside, _MISSING, depth + 1)


def _json_or_missing(value: str) -> Any:
    """The JSON document ``value`` is; ``_MISSING`` when it is none (or no container)."""
    if _JSON_START.match(value) is None:
        return _MISSING
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return _MISSING


def _strings_of(value: Any) -> Iterator[str]:
    """The strings of a JSON value (keys too), depth first."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _literal(match: re.Match[str]) -> str | None:
    """The string a repr's literal stands for; None for a bytes literal or one Python would not read."""
    quoted = match.group(1)
    if len(quoted) < _LEAST_LIMIT + 2:
        return None  # too short to record a text read
    if "\\" not in quoted and match.start(1) == match.start():
        return quoted[1:-1]
    try:
        string = ast.literal_eval(match.group())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return string if isinstance(string, str) else None


def _by_tail(strings: Iterable[str]) -> dict[str, list[str]]:
    """``strings`` by their ``_TAIL`` last characters: those that may end with a text."""
    index: dict[str, list[str]] = {}
    for string in strings:
        index.setdefault(string[-_TAIL:], []).append(string)
    return index


def _forms(text: str) -> Iterator[str]:
    """``text`` as a value may hold it: as it is, as a JSON string's inside, as a Python repr's inside (the
    quote kind a repr picks depends on the whole text: a text with an apostrophe and no double quote is
    written between double quotes unless what was cut off holds one), each as it is and inside a JSON string
    (each once). JSON is written with non-ASCII characters escaped (``json.dumps``' default) or as they are
    (``ensure_ascii=False``, OpenInference's)."""
    yield text
    if _PLAIN.fullmatch(text):
        return  # nothing to escape: all are one
    seen = {text}
    reprs = [repr(text)[1:-1]]
    if "'" in text and '"' not in text:
        reprs.append(repr(text + '"')[1:-2])
    for form in (f for r in (text, *reprs) for f in (r, *_json_insides(r))):
        if form not in seen:
            seen.add(form)
            yield form


def _json_insides(text: str) -> tuple[str, str]:
    """``text`` inside a JSON string, its non-ASCII characters escaped and as they are."""
    return json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]


def _holds(value: str, text: str, forms: list[str]) -> bool:
    """Whether ``value`` holds ``text`` in one of its ``forms``: the opening run the three share is searched
    once, each form checked where it is found."""
    plain = _PLAIN.match(text)
    if plain is None or plain.end() < _TAIL:
        return any(form in value for form in forms)
    probe = text[: plain.end()]
    at = value.find(probe)
    while at >= 0:
        if any(value.startswith(form, at) for form in forms):
            return True
        at = value.find(probe, at + 1)
    return False


def _cut_text(text: str, known: Mapping[int, tuple[str, Any]], shown: frozenset[int]) -> str | None:
    """``cut_short`` of one text, None for a text a reader parsed as JSON (it closes)."""
    entry = known.get(id(text))
    if entry is not None and entry[0] is text and _JSON_START.match(text):
        return None
    return cut_short(text, shown)


def _cut_list(value: list[Any], known: Mapping[int, tuple[str, Any]], shown: frozenset[int]) -> str | None:
    """The first note of the texts of a (nested) list value, None when none may have been cut."""
    return next((w for w in (_cut_text(t, known, shown) for t in _strings(value)) if w is not None), None)


class Dropped(NamedTuple):
    """What an SDK dropped from spans at its count limits (:func:`dropped_note`)."""

    note: str
    """How many of what it dropped: ``"the SDK dropped 3 attributes at its limits (dropped_*_count)"``."""
    switch: str
    """The limits to raise to record them: ``"raise OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT (128 by default)"``."""


def dropped_note(spans: Iterable[RawSpan]) -> Dropped | None:
    """What the SDK dropped from these spans at its count limits, with the variables that raise them;
    None when nothing. An SDK keeps at most 128 attributes and 128 events a span by default (and 128
    attributes a log record, where GenAI events sent as logs reach the span) and says only how many it
    dropped (OTLP ``dropped_attributes_count``, ``dropped_events_count``): a retrieval's documents or a
    model's messages may be among them, so what the span holds is not all it recorded."""
    attributes = events = event_attributes = log_attributes = 0
    for span in spans:
        attributes += span.dropped_attributes_count
        events += span.dropped_events_count
        for event in span.events:
            # GenAI events sent as log records (merged into their span's events) drop at the log SDK's limit.
            if event.log_record:
                log_attributes += event.dropped_attributes_count
            else:
                event_attributes += event.dropped_attributes_count
    if not (attributes or events or event_attributes or log_attributes):
        return None  # read for every model call and retrieval: most spans dropped nothing
    lost = [
        (n, what, variable)
        for n, what, variable in (
            (attributes, "attributes", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"),
            (events, "events", "OTEL_SPAN_EVENT_COUNT_LIMIT"),
            (event_attributes, "event attributes", "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT"),
            (log_attributes, "log record attributes", "OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT"),
        )
        if n
    ]
    if not lost:
        return None
    counts = " and ".join(f"{n} {what.removesuffix('s') if n == 1 else what}" for n, what, _ in lost)
    variables = " and ".join(variable for _, _, variable in lost)
    return Dropped(
        f"the SDK dropped {counts} at its limits (dropped_*_count)", f"raise {variables} (128 by default)"
    )
