"""Dump the TaskRecord (and the verdict) of every corpus trace, to show a normalize change moves nothing.

The corpus is the removal property's (tests/localize/test_removal_property.py: tests/fixtures/traces,
tests/fixtures/outside, the procurement example's scenarios, the hand-built traces). Some of its traces are
recorded when it is built (new ids and times every run), so its spans are saved once and both checkouts read
the same spans:

    .venv/bin/python benchmarks/dump_corpus_records.py --save /tmp/corpus.pkl
    PYTHONPATH=/tmp/old .venv/bin/python benchmarks/dump_corpus_records.py --load /tmp/corpus.pkl old.jsonl
    .venv/bin/python benchmarks/dump_corpus_records.py --load /tmp/corpus.pkl new.jsonl
    cmp old.jsonl new.jsonl

``--removals KIND ...`` also dumps the records of each trace with two or more model calls after every
removal of those kinds (``skew``, ``batch``, ``span``, ``merge``: the ones that move calls' times and
order), one line each.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path
from typing import Any

from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan


def _save(path: Path, kinds: list[str]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests package
    from tests.localize import test_removal_property as prop

    cases = prop.corpus()
    # The cases of one trace under several manifests share its spans (one tuple): pickled once.
    out: list[dict[str, Any]] = [
        {"name": case.name, "spans": case.spans, "ticket": case.ticket, "manifest": case.manifest}
        for case in cases
    ]
    if kinds:
        traces = {id(case.spans): case for case in cases}
        for case in traces.values():
            record = normalize(list(case.spans))
            if len(record.model_calls) < 2:
                continue
            for removal in prop.removals(case, tuple(kinds)):  # type: ignore[arg-type]
                spans = removal.apply(case)
                if spans:
                    out.append({"name": f"{case.name} - {removal.label(case)}", "spans": spans})
    path.write_bytes(pickle.dumps(out))
    print(f"{len(out)} traces saved to {path}")


def _dump(source: Path, target: Path) -> None:
    cases = pickle.loads(source.read_bytes())
    seen: dict[int, str] = {}
    with target.open("w") as out:
        for case in cases:
            key = id(case["spans"])
            spans: list[RawSpan] = list(case["spans"])
            try:
                record = normalize(spans)
            except Exception as error:  # an error is a result to compare too
                out.write(json.dumps({"name": case["name"], "error": repr(error)}) + "\n")
                continue
            line: dict[str, Any] = {"name": case["name"]}
            if key not in seen:
                seen[key] = case["name"]
                line["record"] = json.loads(record.model_dump_json())
            else:
                line["same_spans_as"] = seen[key]
            if "ticket" in case:
                loc = localize(record, case["ticket"], case["manifest"])
                line["localization"] = json.loads(loc.model_dump_json())
            out.write(json.dumps(line, sort_keys=True) + "\n")
    print(f"{len(cases)} traces dumped to {target}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--save", type=Path, help="build the corpus and save its spans here")
    parser.add_argument("--removals", nargs="*", default=[], help="removal kinds to add (with --save)")
    parser.add_argument("--load", type=Path, help="the saved spans to normalize")
    parser.add_argument("out", type=Path, nargs="?", help="where to write the records (with --load)")
    args = parser.parse_args(argv)
    if args.save:
        _save(args.save, args.removals)
    if args.load:
        if args.out is None:
            parser.error("--load needs OUT")
        _dump(args.load, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
