"""SQLite's stored form of spans from store schema 6: the spans of one trace that one commit stores, in
one row of ``span_chunks``, compressed together (in several rows past 512 spans or 4 MiB of their
bytes, ``_sql._CHUNK_SPANS`` and ``_CHUNK_BYTES``: one huge trace is never one huge blob).

A row per span cost SQLite more than the spans' bytes did (each row's insert, its key's index entry,
its share of the commit's pages), and the spans of one trace repeat each other (a retriever's
documents are the prompt's context; attribute keys, resource and scope recur): LZ4 over a trace's
spans of one request takes ~2 ms a 1.3 MB request and leaves a fraction of the bytes to write and
sync (``docs/benchmarks.md``, OTLP intake, store schema 6). Bytes that do not compress are kept as they
are.

A chunk is a codec byte (:data:`RAW` or :data:`LZ4`, plus :data:`ENVELOPED` from store schema 7), then
(compressed or not) a 4-byte little-endian length, a JSON header, and the bytes the header accounts for.

- Schema 6's chunks (no ENVELOPED): the header is one ``[span_id, start_ns, source, otlp, length]``
  per span (``otlp``: 1 when the span is its OTLP ``ResourceSpans``, 0 when it is its JSON), and the
  spans' bytes follow in the header's order.
- From schema 7 (ENVELOPED): the header is ``[envelopes, spans]``: ``envelopes`` one ``[resource_length,
  scope_length]`` per resource and scope the chunk's spans share, ``spans`` one ``[span_id, start_ns,
  source, form, length]`` per span, ``form`` 0 for its JSON, 1 for its ``ResourceSpans``, ``2 + k`` for
  its OTLP ``Span`` alone in envelope ``k``. The envelopes' bytes (each its serialized ``Resource``
  then ``InstrumentationScope``) follow, then the spans'. The receiver's spans arrive as a ``Span``
  and the resource and scope it shares with the rest of its request: kept once a chunk, they are
  neither wrapped around each span nor compressed again with it (wrapping took a tenth of the
  receiver's encode)."""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from tracejudge._errors import StoreDamageError, StoreError
from tracejudge.store._encoded import DAMAGED_HINT, OtlpEnvelope, OtlpForm

__all__ = [
    "ENVELOPED",
    "LZ4",
    "RAW",
    "ChunkRow",
    "Entry",
    "SpanIdCache",
    "chunk_span_ids",
    "pack_chunk",
    "pack_spans",
    "sorted_rows",
    "unpack_chunk",
]

RAW = 0
"""Codec byte: the chunk's bytes as they are."""
LZ4 = 1
"""Codec byte: an LZ4 block (``lz4.block``, its size stored in front)."""
ENVELOPED = 2
"""Added to the codec byte: the header holds the chunk's envelopes (store schema 7)."""

_LEN = 4
# Below this the codec's work buys nothing: a span or two of a few hundred bytes.
_MIN_COMPRESS = 256

ChunkRow = tuple[str, int, str, OtlpForm | None, str]
"""One span of a chunk: (span id, start ns, payload, otlp, source) -- ``payload`` the span's JSON and
``otlp`` None, or ``payload`` empty and ``otlp`` its OTLP form (:data:`OtlpForm`), as schema 5's ``spans``
rows held them."""


@functools.cache
def _lz4() -> Any:
    try:
        import lz4.block
    except ImportError as exc:  # pragma: no cover - a dependency of tracejudge
        raise StoreError(
            "the lz4 package is missing: the SQLite store keeps spans LZ4-compressed",
            hint="pip install lz4 (a dependency of tracejudge: reinstall tracejudge)",
        ) from exc
    return lz4.block


Entry = tuple[str, int, str, int, int]
"""A span's header entry: (span id, start ns, source, form, length); form 0 for its JSON, 1 for its
OTLP ``ResourceSpans``, ``2 + k`` for its OTLP ``Span`` in the chunk's envelope ``k``."""


def _compressed(raw: bytes) -> bytes:
    if len(raw) >= _MIN_COMPRESS:
        packed: bytes = _lz4().compress(raw, store_size=True)
        if len(packed) < len(raw):
            return _LZ4_ENVELOPED + packed
    return _RAW_ENVELOPED + raw


_RAW_ENVELOPED = bytes((RAW | ENVELOPED,))
_LZ4_ENVELOPED = bytes((LZ4 | ENVELOPED,))


def pack_chunk(header: list[Entry], bodies: list[bytes], envelopes: Sequence[OtlpEnvelope] = ()) -> bytes:
    """The chunk of spans whose header entries are ``header`` and whose bytes are ``bodies``, in that
    order, in ``envelopes`` (a span of form ``2 + k`` in ``envelopes[k]``), compressed when that makes
    it smaller."""
    head = orjson.dumps([[[len(e.resource), len(e.scope)] for e in envelopes], header])
    pieces = [len(head).to_bytes(_LEN, "little"), head]
    for e in envelopes:
        pieces += (e.resource, e.scope)
    return _compressed(b"".join((*pieces, *bodies)))


def pack_spans(spans: Iterable[tuple[str, int, str, str, bytes | None]]) -> bytes:
    """The chunk of spans given as (span id, start ns, source, payload, otlp) -- ``otlp`` None for a
    span stored as its JSON ``payload``, else its ``ResourceSpans``."""
    header: list[Entry] = []
    bodies: list[bytes] = []
    for span_id, start, source, payload, otlp in spans:
        body = payload.encode() if otlp is None else otlp
        header.append((span_id, start, source, 0 if otlp is None else 1, len(body)))
        bodies.append(body)
    return pack_chunk(header, bodies)


def _raw(chunk: bytes) -> tuple[bytes, bool]:
    """The chunk's bytes uncompressed, and whether its header holds envelopes."""
    byte = chunk[0] if chunk else -1
    codec, enveloped = byte & ~ENVELOPED, bool(byte & ENVELOPED)  # no byte: -1, an unknown codec
    if codec == RAW:
        return chunk[1:], enveloped
    if codec == LZ4:
        # LZ4 compresses at most ~255:1: a stored size past that is damage, which lz4 would first
        # reserve that much memory for (up to 2 GiB).
        if int.from_bytes(chunk[1 : 1 + _LEN], "little") > 255 * len(chunk) + 64:
            raise StoreDamageError(
                "a stored chunk of spans declares more bytes than it can hold", hint=DAMAGED_HINT
            )
        lz4 = _lz4()
        try:
            return bytes(lz4.decompress(chunk[1:])), enveloped
        # ValueError: fewer than the 4 bytes of the stored size, or a size past 2 GiB.
        except (lz4.LZ4BlockError, ValueError) as exc:
            raise StoreDamageError(
                f"a stored chunk of spans does not decompress: {exc}", hint=DAMAGED_HINT
            ) from exc
    raise StoreDamageError(f"a stored chunk of spans has an unknown codec ({byte})", hint=DAMAGED_HINT)


def _unreadable() -> StoreDamageError:
    return StoreDamageError("a stored chunk of spans has an unreadable header", hint=DAMAGED_HINT)


def _header(raw: bytes, enveloped: bool) -> tuple[list[tuple[int, int]], list[Any], int]:
    """The header's envelope sizes and span entries (unchecked), and where the bytes after it start."""
    size = int.from_bytes(raw[:_LEN], "little")
    try:
        header = orjson.loads(raw[_LEN : _LEN + size])
    except orjson.JSONDecodeError as exc:
        raise StoreDamageError(
            f"a stored chunk of spans has an unreadable header: {exc}", hint=DAMAGED_HINT
        ) from exc
    if not isinstance(header, list):
        raise _unreadable()
    if not enveloped:
        return [], header, _LEN + size
    if not (len(header) == 2 and isinstance(header[0], list) and isinstance(header[1], list)):
        raise _unreadable()
    sizes: list[tuple[int, int]] = []
    for entry in header[0]:
        if not (
            isinstance(entry, list) and len(entry) == 2 and all(type(n) is int and n >= 0 for n in entry)
        ):
            raise StoreDamageError(
                f"a stored chunk of spans has an unreadable envelope: {entry!r:.200}", hint=DAMAGED_HINT
            )
        sizes.append((entry[0], entry[1]))
    return sizes, header[1], _LEN + size


def _entries(header: list[Any], envelopes: int) -> list[tuple[str, int, str, int, int]]:
    """The header's ``[span_id, start_ns, source, form, length]`` entries, each checked: a damaged one
    would otherwise cut the wrong bytes or fail the read's sort with a TypeError."""
    entries: list[tuple[str, int, str, int, int]] = []
    forms = 2 + envelopes
    for entry in header:
        if not (isinstance(entry, list) and len(entry) == 5):
            raise _unreadable()
        span_id, start, source, form, length = entry
        if not (
            isinstance(span_id, str)
            and type(start) is int
            and isinstance(source, str)
            and type(form) is int
            and 0 <= form < forms
            and type(length) is int
            and length >= 0
        ):
            raise StoreDamageError(
                f"a stored chunk of spans has an unreadable header entry: {entry!r:.200}", hint=DAMAGED_HINT
            )
        entries.append((span_id, start, source, form, length))
    return entries


def _envelopes(raw: bytes, sizes: list[tuple[int, int]], at: int) -> tuple[list[OtlpEnvelope], int]:
    envelopes: list[OtlpEnvelope] = []
    for resource, scope in sizes:
        envelopes.append(OtlpEnvelope(raw[at : at + resource], raw[at + resource : at + resource + scope]))
        at += resource + scope
    return envelopes, at


def unpack_chunk(chunk: bytes, *, wrap: bool = True) -> list[ChunkRow]:
    """The spans of a chunk, in the order they were packed; an OTLP span as its ``ResourceSpans``, or with
    ``wrap`` False (the read path's) a ``Span`` kept in an envelope as (its bytes, the envelope)."""
    raw, enveloped = _raw(bytes(chunk))
    sizes, header, at = _header(raw, enveloped)
    entries = _entries(header, len(sizes))
    envelopes, at = _envelopes(raw, sizes, at)
    rows: list[ChunkRow] = []
    try:
        for span_id, start, source, form, length in entries:
            body = raw[at : at + length]
            at += length
            if form == 0:
                rows.append((span_id, start, body.decode(), None, source))
            elif form == 1:
                rows.append((span_id, start, "", body, source))
            else:
                envelope = envelopes[form - 2]
                rows.append((span_id, start, "", envelope.wrap(body) if wrap else (body, envelope), source))
    except UnicodeDecodeError as exc:
        raise StoreDamageError(
            f"a stored chunk of spans holds a JSON span that is not UTF-8: {exc}", hint=DAMAGED_HINT
        ) from exc
    if at != len(raw):
        raise StoreDamageError(
            f"a stored chunk of spans holds {len(raw)} bytes where its header accounts for {at}",
            hint=DAMAGED_HINT,
        )
    return rows


def chunk_span_ids(chunk: bytes) -> list[str]:
    """The span ids of a chunk (its header alone is read)."""
    raw, enveloped = _raw(bytes(chunk))
    sizes, header, _ = _header(raw, enveloped)
    return [entry[0] for entry in _entries(header, len(sizes))]


def sorted_rows(rows: Sequence[ChunkRow]) -> list[tuple[str, OtlpForm | None, str]]:
    """(payload, otlp, source) of a trace's spans ordered as schema 5 read them: by start, then span id."""
    return [(r[2], r[3], r[4]) for r in sorted(rows, key=lambda r: (r[1], r[0]))]


class SpanIdCache:
    """The span ids a writer has read from the chunks of recently written traces, with the id of the
    last chunk read for each: a trace's next batch reads only the chunks stored since (by any writer:
    chunk ids only grow). A trace exported a span per request (an SDK's simple span processor) would
    otherwise read all its chunks again for each span, quadratic in its length. At most ``most``
    traces, the least recently used let go (read again whole when they come back). Only committed
    chunks are read into it, so a transaction rolled back after a read leaves it right."""

    def __init__(self, most: int = 256) -> None:
        self._most = most
        self._by_seq: OrderedDict[int, tuple[int, set[str]]] = OrderedDict()

    def since(self, seq: int) -> int:
        """The id of the last chunk of trace ``seq`` read (0: none)."""
        entry = self._by_seq.get(seq)
        return 0 if entry is None else entry[0]

    def ids(self, seq: int) -> set[str]:
        """The span ids read for trace ``seq``: the cache's own set, which the caller may add the ids
        of later stored chunks to (a new set when none is kept)."""
        entry = self._by_seq.get(seq)
        return set() if entry is None else entry[1]

    def keep(self, seq: int, last: int, ids: set[str]) -> None:
        """Remember ``ids`` as trace ``seq``'s span ids in its chunks up to id ``last``."""
        self._by_seq[seq] = (last, ids)
        self._by_seq.move_to_end(seq)
        while len(self._by_seq) > self._most:
            self._by_seq.popitem(last=False)
