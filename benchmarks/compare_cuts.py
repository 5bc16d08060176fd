"""How the cut rule reads the corpus's values, whole and cut: run before and after a change to
``tracejudge/normalize/_cut.py`` and compare.

Over every distinct span of the removal property's corpus (tests/localize/test_removal_property.py: the
recorded fixtures, outside traces, procurement and DSPy cases), three counts:

- ``whole``: the cut notes ``cut_values`` gives the spans as recorded (a note here on a whole value moves a
  verdict to ``unconfirmed``; the notes themselves are written with ``--notes FILE`` to diff two runs);
- ``held quote cuts``: every text value (>= 64 characters) that a longer value of its span holds (as it is, as
  JSON or as a repr: ``_cut._forms``), cut right before each quote or apostrophe it holds
  (position >= 64), where the held-longer rule reads it (``_may_be_held_longer``): how many still read whole;
- ``held limit cuts``: the same texts cut at the lengths exporters use (``LENGTHS``): how many read whole.

A cut value read as whole can give a definite verdict the trace cannot support (DESIGN 5.5).

Run: .venv/bin/python benchmarks/compare_cuts.py [--notes FILE] [--show N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.localize.test_removal_property import corpus
from tracejudge.normalize import _cut
from tracejudge.schema import RawSpan

LENGTHS = (64, 100, 128, 200, 250, 333, 777, 1000, 1024, 3000)


def _spans() -> Iterator[RawSpan]:
    """Every distinct span of the corpus (cases share traces under other manifests)."""
    seen: set[str] = set()
    for case in corpus():
        for span in case.spans:
            key = json.dumps([span.attributes, [e.attributes for e in span.events]], default=str)
            if key not in seen:
                seen.add(key)
                yield span


def _held(span: RawSpan, key: str, text: str) -> bool:
    """Whether another, longer attribute of ``span`` holds ``text`` in one of its forms."""
    forms = list(_cut._forms(text))
    return any(
        isinstance(v, str) and len(v) > len(text) and any(f in v for f in forms)
        for k, v in span.attributes.items()
        if k != key
    )


def _reads_whole(span: RawSpan, key: str, cut: str) -> bool:
    """Whether ``cut_values`` gives no note on ``key`` once its value is ``cut``."""
    attrs: dict[str, Any] = {**span.attributes, key: cut}
    notes = _cut.cut_values(span.model_copy(update={"attributes": attrs}))
    return not any(n.startswith(f"{key}: ") for n in notes)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", help="write the notes on the spans as recorded to this JSON file")
    parser.add_argument("--show", type=int, default=5, help="print this many cuts read whole")
    args = parser.parse_args(argv)
    started = time.monotonic()
    notes: list[str] = []
    quote = [0, 0]  # cuts tried, read whole
    limit = [0, 0]
    shown: list[str] = []
    spans = 0
    for span in _spans():
        spans += 1
        notes += [f"{span.name} {span.span_id}: {n}" for n in _cut.cut_values(span)]
        for key, value in span.attributes.items():
            if not isinstance(value, str) or len(value) <= _cut._LEAST_LIMIT or not _held(span, key, value):
                continue
            quotes = [k for k, c in enumerate(value) if c in "\"'" and k >= _cut._LEAST_LIMIT]
            for tally, ends in ((quote, quotes), (limit, [n for n in LENGTHS if n < len(value)])):
                for end in ends:
                    cut = value[:end]
                    if not _cut._may_be_held_longer(cut, frozenset()) or not _held(span, key, cut):
                        continue
                    tally[0] += 1
                    if _reads_whole(span, key, cut):
                        tally[1] += 1
                        if len(shown) < args.show:
                            shown.append(f"{span.name}:{key}@{end} ...{value[end - 40 : end + 20]!r}")
    print(f"spans: {spans}; cut notes on the spans as recorded (whole): {len(notes)}")
    print(f"held quote cuts: {quote[0]} tried, {quote[1]} read whole")
    print(f"held limit cuts: {limit[0]} tried, {limit[1]} read whole")
    for line in shown:
        print("  read whole:", line)
    if args.notes:
        Path(args.notes).write_text(json.dumps(sorted(notes), indent=0))
    print(f"{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
