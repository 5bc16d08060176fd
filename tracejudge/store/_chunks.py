"""SQLite's stored form of spans from store schema 6: the spans of one trace that one commit stores, in
one row of ``span_chunks``, compressed together.

A row per span cost SQLite more than the spans' bytes did (each row's insert, its key's index entry,
its share of the commit's pages), and the spans of one trace repeat each other (a retriever's
documents are the prompt's context; attribute keys, resource and scope recur): LZ4 over a trace's
spans of one request takes ~2 ms a 1.3 MB request and leaves a fraction of the bytes to write and
sync (``docs/benchmarks.md``, OTLP intake, store schema 6). Bytes that do not compress are kept as they
are.

A chunk is a codec byte (:data:`RAW` or :data:`LZ4`), then (compressed or not) a 4-byte little-endian
length, a JSON header of one ``[span_id, start_ns, source, otlp, length]`` per span (``otlp``: 1 when
the span is its OTLP bytes, 0 when it is its JSON), and the spans' bytes in the header's order.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from tracejudge._errors import StoreError

__all__ = [
    "LZ4",
    "RAW",
    "ChunkRow",
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

_LEN = 4
# Below this the codec's work buys nothing: a span or two of a few hundred bytes.
_MIN_COMPRESS = 256

ChunkRow = tuple[str, int, str, bytes | None, str]
"""One span of a chunk: (span id, start ns, payload, otlp, source) -- ``payload`` the span's JSON and
``otlp`` None, or ``payload`` empty and ``otlp`` its OTLP bytes, as schema 5's ``spans`` rows held them."""

_HINT = (
    "the store's file is damaged or was changed by something other than tracejudge: run"
    " `tracejudge doctor`, and restore the store from a backup if it reports damage"
)


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


def pack_chunk(header: list[tuple[str, int, str, int, int]], bodies: list[bytes]) -> bytes:
    """The chunk of spans whose header entries are ``header`` -- (span id, start ns, source, 1 for its
    OTLP bytes or 0 for its JSON, length) each -- and whose bytes are ``bodies``, in that order."""
    head = orjson.dumps(header)
    raw = b"".join((len(head).to_bytes(_LEN, "little"), head, *bodies))
    if len(raw) >= _MIN_COMPRESS:
        packed = _lz4().compress(raw, store_size=True)
        if len(packed) < len(raw):
            return b"\x01" + bytes(packed)
    return b"\x00" + raw


def pack_spans(spans: Iterable[tuple[str, int, str, str, bytes | None]]) -> bytes:
    """The chunk of spans given as (span id, start ns, source, payload, otlp) -- ``otlp`` None for a
    span stored as its JSON ``payload``."""
    header: list[tuple[str, int, str, int, int]] = []
    bodies: list[bytes] = []
    for span_id, start, source, payload, otlp in spans:
        body = payload.encode() if otlp is None else otlp
        header.append((span_id, start, source, 0 if otlp is None else 1, len(body)))
        bodies.append(body)
    return pack_chunk(header, bodies)


def _raw(chunk: bytes) -> bytes:
    codec = chunk[0] if chunk else -1
    if codec == RAW:
        return chunk[1:]
    if codec == LZ4:
        # LZ4 compresses at most ~255:1: a stored size past that is damage, which lz4 would first
        # reserve that much memory for (up to 2 GiB).
        if int.from_bytes(chunk[1 : 1 + _LEN], "little") > 255 * len(chunk) + 64:
            raise StoreError("a stored chunk of spans declares more bytes than it can hold", hint=_HINT)
        lz4 = _lz4()
        try:
            return bytes(lz4.decompress(chunk[1:]))
        # ValueError: fewer than the 4 bytes of the stored size, or a size past 2 GiB.
        except (lz4.LZ4BlockError, ValueError) as exc:
            raise StoreError(f"a stored chunk of spans does not decompress: {exc}", hint=_HINT) from exc
    raise StoreError(f"a stored chunk of spans has an unknown codec ({codec})", hint=_HINT)


def _header(raw: bytes) -> tuple[list[Any], int]:
    size = int.from_bytes(raw[:_LEN], "little")
    try:
        header = orjson.loads(raw[_LEN : _LEN + size])
    except orjson.JSONDecodeError as exc:
        raise StoreError(f"a stored chunk of spans has an unreadable header: {exc}", hint=_HINT) from exc
    if not isinstance(header, list):
        raise StoreError("a stored chunk of spans has an unreadable header", hint=_HINT)
    return header, _LEN + size


def _entries(header: list[Any]) -> list[tuple[str, int, str, bool, int]]:
    """The header's ``[span_id, start_ns, source, otlp, length]`` entries, each checked: a damaged one
    would otherwise cut the wrong bytes or fail the read's sort with a TypeError."""
    entries: list[tuple[str, int, str, bool, int]] = []
    for entry in header:
        if not (isinstance(entry, list) and len(entry) == 5):
            raise StoreError("a stored chunk of spans has an unreadable header", hint=_HINT)
        span_id, start, source, otlp, length = entry
        if not (
            isinstance(span_id, str)
            and type(start) is int
            and isinstance(source, str)
            and otlp in (0, 1)
            and type(length) is int
            and length >= 0
        ):
            raise StoreError(
                f"a stored chunk of spans has an unreadable header entry: {entry!r:.200}", hint=_HINT
            )
        entries.append((span_id, start, source, bool(otlp), length))
    return entries


def unpack_chunk(chunk: bytes) -> list[ChunkRow]:
    """The spans of a chunk, in the order they were packed."""
    raw = _raw(bytes(chunk))
    header, at = _header(raw)
    rows: list[ChunkRow] = []
    try:
        for span_id, start, source, otlp, length in _entries(header):
            body = raw[at : at + length]
            at += length
            rows.append(
                (span_id, start, "", body, source) if otlp else (span_id, start, body.decode(), None, source)
            )
    except UnicodeDecodeError as exc:
        raise StoreError(
            f"a stored chunk of spans holds a JSON span that is not UTF-8: {exc}", hint=_HINT
        ) from exc
    if at != len(raw):
        raise StoreError(
            f"a stored chunk of spans holds {len(raw)} bytes where its header accounts for {at}", hint=_HINT
        )
    return rows


def chunk_span_ids(chunk: bytes) -> list[str]:
    """The span ids of a chunk (its header alone is read)."""
    header, _ = _header(_raw(bytes(chunk)))
    return [entry[0] for entry in _entries(header)]


def sorted_rows(rows: Sequence[ChunkRow]) -> list[tuple[str, bytes | None, str]]:
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
